/**
 * Where the library says what it does: a logger with the four usual levels (console,
 * pino, winston and bunyan loggers all fit). Tokens and raw arguments are never logged.
 */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Warnings and errors to the console, as a library should by default; nothing else. */
export const consoleLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: (message) => console.warn(`mcp-breaker: ${message}`),
  error: (message) => console.error(`mcp-breaker: ${message}`),
};

export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};
