// The official TypeScript SDK's client against the edge: list, call, an invalid call and
// an unknown tool. Usage: node tsclient.mjs URL [TOKEN]. Prints one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client({ name: "mcpedge-ts-test", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const out = { protocolVersion: client.transport.protocolVersion ?? null };
const list = await client.listTools();
out.tools = list.tools.map((t) => t.name);
out.addSchema = list.tools.find((t) => t.name === "add")?.inputSchema ?? null;
out.ok = await client.callTool({ name: "add", arguments: { a: 40, b: 2 } });
out.invalid = await client.callTool({ name: "add", arguments: { a: "forty" } });
try {
  await client.callTool({ name: "no_such_thing", arguments: {} });
  out.unknown = null;
} catch (e) {
  out.unknown = { code: e.code, message: e.message };
}
await client.close();
console.log(JSON.stringify(out));
