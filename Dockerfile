# The tidemark worker / CLI image. Workflows are bundled at worker start.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY . .
USER node
CMD ["npx", "tsx", "workers/worker.ts"]
