/** A loopback TCP relay a test can break in the ways networks do. */
import { createServer, type Server, type Socket, connect } from "node:net";

import { LOOPBACK } from "./ports.js";

export class TcpProxy {
  target: string;
  private readonly server: Server;
  private sockets = new Set<Socket>();
  private held = false;
  private frozen = false;
  private readonly stalled: Array<() => void> = [];
  port = 0;

  private constructor(target: string) {
    this.target = target;
    this.server = createServer((downstream) => this.accept(downstream));
  }

  static async start(target: string): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve) => proxy.server.listen(0, LOOPBACK, resolve));
    const address = proxy.server.address();
    proxy.port = typeof address === "object" && address !== null ? address.port : 0;
    return proxy;
  }

  get endpoint(): string {
    return `${LOOPBACK}:${this.port}`;
  }

  /** Close every connection; with `hold`, refuse new ones until `release`. */
  cut(hold: boolean): void {
    this.held = hold;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  release(): void {
    this.held = false;
  }

  /** Connections stay open but nothing crosses them (a silently dead peer). */
  freeze(): void {
    this.frozen = true;
  }

  thaw(): void {
    this.frozen = false;
    for (const flush of this.stalled.splice(0)) flush();
  }

  close(): Promise<void> {
    this.cut(true);
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(downstream: Socket): void {
    if (this.held) {
      downstream.destroy();
      return;
    }
    const at = this.target.lastIndexOf(":");
    const upstream = connect(Number(this.target.slice(at + 1)), this.target.slice(0, at));
    for (const [source, sink] of [
      [downstream, upstream],
      [upstream, downstream],
    ] as const) {
      this.sockets.add(source);
      source.on("error", () => {});
      source.on("close", () => {
        this.sockets.delete(source);
        sink.destroy();
      });
      // While frozen, what arrives waits here, as in a peer's full buffers.
      source.on("data", (chunk: Buffer) => {
        if (this.frozen) this.stalled.push(() => sink.write(chunk));
        else sink.write(chunk);
      });
    }
  }
}
