// Text that people typed, made inert inside Slack mrkdwn: `<...>` would otherwise become a
// mention (`<!channel>`, `<@U123>`) or a link, and `&` starts an entity.
export function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
