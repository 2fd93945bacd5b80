// What the status page says when a call never reached the node.

import { ConnectError, describeError } from "../index.js";

// What browsers say when fetch() gets no HTTP answer at all: the node is down
// or unreachable, or (for a page of another origin) the browser withheld the
// answer because the node does not allow the page's origin (CORS). The page
// cannot tell these apart: the browser hides which one it was.
const NETWORK_FAILURES = [
  "Failed to fetch", // Chromium
  "NetworkError when attempting to fetch resource", // Firefox
  "Load failed", // Safari
  "fetch failed", // Node's fetch
];

/**
 * describeCallError says what went wrong with a call to the node at `api`,
 * from a page served at `pageOrigin`: a Connect error as `code: message`, and
 * a call that got no answer at all as the address that could not be reached
 * and why it may be — down or unreachable, or, when the page is on another
 * origin, the node not allowing it (`seqd serve --cors-origin`).
 */
export function describeCallError(err: unknown, api: string, pageOrigin: string): string {
  const ce = ConnectError.from(err);
  if (!NETWORK_FAILURES.some((m) => ce.rawMessage.includes(m))) return describeError(ce);
  let apiOrigin = api;
  try {
    apiOrigin = new URL(api).origin;
  } catch {
    // not a URL: name it as given
  }
  if (apiOrigin === pageOrigin) {
    return `cannot reach ${api}: the node is down or unreachable (no answer)`;
  }
  return `cannot reach ${api}: the node is down or unreachable, or it does not allow this page's origin ${pageOrigin} (start it with --cors-origin ${pageOrigin})`;
}
