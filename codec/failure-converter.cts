// The same failure converter for the SDK's require() (clients and the worker's activity side load a
// failureConverterPath with require(), so this module is CommonJS: dist/codec/failure-converter.cjs).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS module (see above)
import common = require('@temporalio/common');

const failureConverter = new common.DefaultFailureConverter({ encodeCommonAttributes: true });
export = { failureConverter };
