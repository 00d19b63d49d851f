// The error of a wrong setting: it names the setting (an environment variable, or a key of a file)
// and says how to fix it.

export class ConfigError extends Error {
  readonly code = 'CONFIG';
  constructor(
    readonly variable: string,
    detail: string,
    /** How the setting is named in the message: an environment variable unless said otherwise. */
    kind: 'variable' | 'setting' = 'variable',
  ) {
    super(kind === 'variable' ? `environment variable ${variable}: ${detail}` : `${variable}: ${detail}`);
    this.name = 'ConfigError';
  }
}
