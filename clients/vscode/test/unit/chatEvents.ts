// The host's events the fold tests feed the chat, written once (state.test.ts, panelFeatures.test.ts).
import type { ChatEvent } from "../../src/protocol";

/** An `agent_message_chunk` update of `text`, with its `messageId` when given. */
export const chunk = (text: string, messageId?: string): ChatEvent => ({ kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, ...(messageId ? { messageId } : {}) } });
