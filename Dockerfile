# The tidemark image, built from the npm package exactly as a user installs it.
# Stage 1 builds and packs (npm pack runs prepack: the TypeScript build into dist/);
# stage 2 installs that tarball alone, without the sources, dev dependencies or tsx workflow.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN mkdir /pkg && npm pack --pack-destination /pkg

FROM node:24-bookworm-slim
WORKDIR /app
COPY --from=build /pkg/ /tmp/pkg/
RUN npm init -y >/dev/null \
  && npm pkg set type=module \
  && npm install --omit=dev --no-audit --no-fund /tmp/pkg/tidemark-*.tgz \
  && rm -rf /tmp/pkg ~/.npm
ENV PATH=/app/node_modules/.bin:$PATH NODE_ENV=production
# The worker's heap caps (workers/memory.ts: without them V8 grows each heap far past what is live)
# and fewer glibc arenas for the threads of the SDK's core; raise --max-old-space-size for handlers
# that hold more in memory.
ENV NODE_OPTIONS="--max-old-space-size=256 --max-semi-space-size=1" MALLOC_ARENA_MAX=2
# The user's catalog: mount a directory at /app/catalog (inside /app, so its `import ... from
# 'tidemark'` finds this install) and set TIDEMARK_CATALOG=/app/catalog/tidemark.config.js.
# Without it the demo catalog runs.
RUN mkdir -p /app/catalog /app/.tidemark && chown node:node /app/.tidemark
VOLUME ["/app/catalog"]
USER node
CMD ["tidemark", "worker"]
