// Drives `fermix acp` with the official TypeScript ACP SDK: initialize, session/new,
// session/prompt with streamed session/update chunks, then a held prompt cancelled after
// its first chunk. Prints one JSON line with what it saw; the Python test checks it.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { ClientApp, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [fermix, cwd] = process.argv.slice(2);
const child = spawn(fermix, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const chunks = {};
let wake = () => {};
const app = new ClientApp();
app.onNotification("session/update", ({ params }) => {
  const update = params.update;
  if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
    (chunks[params.sessionId] ??= []).push(update.content.text);
    wake();
  }
});
const connection = app.connect(stream);
const agent = connection.agent;

const init = await agent.request("initialize", {
  protocolVersion: PROTOCOL_VERSION,
  clientCapabilities: {},
});
const { sessionId } = await agent.request("session/new", { cwd, mcpServers: [] });
const first = await agent.request("session/prompt", {
  sessionId,
  prompt: [{ type: "text", text: "hello from typescript" }],
});
const streamed = [...(chunks[sessionId] ?? [])];

const held = agent.request("session/prompt", {
  sessionId,
  prompt: [{ type: "text", text: "hold: from typescript" }],
});
while ((chunks[sessionId] ?? []).length <= streamed.length) {
  await new Promise((resolve) => (wake = resolve));
}
await agent.notify("session/cancel", { sessionId });
const cancelled = await held;

console.log(
  JSON.stringify({
    protocolVersion: init.protocolVersion,
    agentName: init.agentInfo?.name,
    loadSession: init.agentCapabilities?.loadSession,
    firstStop: first.stopReason,
    streamed,
    cancelledStop: cancelled.stopReason,
  }),
);
connection.close();
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
