// An error the page answers with its status and message (a 400 names the field and the fix).
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
