/**
 * The one error this library throws of its own: a bad option, found when it is given.
 *
 * Everything a harness must expect at run time is a result or an event, never an
 * exception: a refused call is a `CheckResult`, a service that is down or slow makes
 * `checkRemote` allow the call (`answered: false`), a rejected token stops the
 * subscription and says why in `failure` and the `"failure"` event.
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}
