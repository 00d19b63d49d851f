// A view's own stylesheet, added once as a <link> (the page's CSP, style-src 'self', allows it), so
// a view brings its styles without editing the page's app.css.
export function useStyles(href) {
  if (document.querySelector(`link[href="${href}"]`)) return;
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = href;
  document.head.append(link);
}
