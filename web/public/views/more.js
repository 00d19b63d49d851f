// "Show more" for a list the server answers in pages (a Link to the next one while more follow):
// each click fetches the next page and hands its items to `add`; the button goes with the last page.
import { h } from '../dom.js';

export function showMore(ctx, label, add) {
  const box = h('div', { class: 'more' });
  const offer = (next) =>
    box.replaceChildren(
      next
        ? h(
            'button',
            {
              type: 'button',
              onclick: async () => {
                const p = await ctx.apiPage(next);
                add(p.items);
                offer(p.next);
              },
            },
            label,
          )
        : [],
    );
  return { box, offer };
}
