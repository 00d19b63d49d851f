// The running activity's Temporal context, or undefined where the code runs outside one: an
// activity function called directly (the CLI, npm start, deliverNow, a test).
import { Context } from '@temporalio/activity';

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}
