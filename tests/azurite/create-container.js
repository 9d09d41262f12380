// Creates a blob container on azurite: object_store has no call for it, and the Azure
// SDK is not among azurite's own modules. A Create Container request signed with
// Shared Key, as https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key
// describes, for azurite's well-known development account.
//
// usage: node create-container.js <port> <container>
"use strict";
const crypto = require("crypto");
const http = require("http");

const [port, container] = process.argv.slice(2);
const account = "devstoreaccount1";
const key = Buffer.from(
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
  "base64",
);
const date = new Date().toUTCString();
const version = "2021-08-06";
const path = `/${account}/${container}`;
// With an IP-style URL the account is the first path segment, so the canonicalized
// resource names it twice.
const resource = `/${account}${path}\nrestype:container`;
const headers = `x-ms-date:${date}\nx-ms-version:${version}\n`;
const toSign = ["PUT", "", "", "", "", "", "", "", "", "", "", "", headers + resource].join("\n");
const sig = crypto.createHmac("sha256", key).update(toSign, "utf8").digest("base64");
const req = http.request(
  {
    host: "127.0.0.1",
    port,
    method: "PUT",
    path: `${path}?restype=container`,
    headers: {
      "x-ms-date": date,
      "x-ms-version": version,
      "Content-Length": 0,
      Authorization: `SharedKey ${account}:${sig}`,
    },
  },
  (res) => {
    let body = "";
    res.on("data", (c) => (body += c));
    res.on("end", () => {
      if (res.statusCode === 201 || res.statusCode === 409) process.exit(0);
      console.error(`create container ${container}: ${res.statusCode} ${body}`);
      process.exit(1);
    });
  },
);
req.on("error", (e) => {
  console.error(`create container ${container}: ${e.message}`);
  process.exit(1);
});
req.end();
