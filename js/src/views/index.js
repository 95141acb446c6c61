// @ts-check
// The views, under the names the payload's `views` use (src/torchprof/_vocab.py VIEWS, in the
// switcher's order there). A view is one module of this folder holding both of its halves (pure
// layout, DOM) and one entry here; tests/test_frontend.py checks this list against VIEWS.
import * as flame from "./flame.js";
import * as insights from "./insights.js";
import * as memory from "./memory.js";
import * as steps from "./steps.js";
import * as table from "./table.js";
import * as top from "./top.js";

/** @type {Record<string, import("../types.js").ViewModule>} */
export const VIEWS = { table, insights, flame, top, steps, memory };
