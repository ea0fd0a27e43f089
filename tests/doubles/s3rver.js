// s3rver.js PORT DIR BUCKET... - an S3-compatible server for the s3:// tests.
//
// Serves http://127.0.0.1:PORT with path-style buckets, keeps objects in DIR,
// creates each BUCKET, checks SigV4 signatures (credentials S3RVER/S3RVER) and
// prints "ready PORT" once it listens (PORT 0: any free port, the one printed).
// With S3RVER_LOG=1 it also prints "request METHOD URL" for each request.
// Run it with `node --openssl-legacy-provider`: s3rver's ListObjectsV2
// continuation tokens are DES-encrypted.
'use strict';

const S3rver = require('@20minutes/s3rver');

const [port, directory, ...buckets] = process.argv.slice(2);
if (!port || !directory || buckets.length === 0) {
  console.error('usage: s3rver.js PORT DIR BUCKET...');
  process.exit(2);
}

const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory,
  silent: true,
  configureBuckets: buckets.map((name) => ({ name })),
});

server.run().then(
  (address) => {
    if (process.env.S3RVER_LOG === '1') {
      server.httpServer.on('request', (req) => console.log(`request ${req.method} ${req.url}`));
    }
    console.log(`ready ${address.port}`);
  },
  (err) => {
    console.error(`s3rver: ${err.message}`);
    process.exit(1);
  },
);
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close().finally(() => process.exit(0)));
}
