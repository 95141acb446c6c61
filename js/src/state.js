// @ts-check
// The view state: a model for pages without a kernel (the report), and the state read from a
// model by the vocabulary's keys, types and defaults.

/** @import { Model, Vocab, FullState } from "./types.js" */

/**
 * That model kept in the page (the HTML report).
 * @param {Record<string, any>} initial
 * @returns {Model}
 */
export function createModel(initial) {
  /** @type {Record<string, any>} */
  const state = { ...initial };
  /** @type {Map<string, Set<() => void>>} */
  const listeners = new Map();
  const emit = (/** @type {string} */ event) => {
    for (const cb of [...(listeners.get(event) || [])]) cb();
  };
  return {
    get: (key) => state[key],
    set(key, value) {
      const old = state[key];
      state[key] = value;
      if (old !== value) emit("change:" + key);
    },
    on(event, cb) {
      if (!listeners.has(event)) listeners.set(event, new Set());
      listeners.get(event)?.add(cb);
    },
    off(event, cb) {
      if (event === undefined) listeners.clear();
      else if (cb === undefined) listeners.delete(event);
      else listeners.get(event)?.delete(cb);
    },
    save_changes() {
      emit("save");
    },
  };
}

/**
 * A model value as its key's type reads it; a missing one (or empty text) is the key's default.
 * @param {import("./types.js").StateKeySpec} key @param {any} value
 */
export function stateValue(key, value) {
  const missing = value === undefined || value === null;
  switch (key.type) {
    case "float": {
      const n = Number(value);
      return missing || Number.isNaN(n) ? Number(key.default) || 0 : n;
    }
    case "bool": return missing ? !!key.default : !!value;
    case "paths": return missing ? [] : value;
    default: return missing || value === "" ? String(key.default ?? "") : String(value);
  }
}

/**
 * The model's view state, read fresh each time by the vocabulary's keys; a `paths` key (the
 * expanded rows) as a Set, rebuilt only when the list itself changed, and as the list under
 * `<key>List`.
 * @param {Model} model @param {Vocab} vocab
 * @returns {() => FullState}
 */
export function stateReader(model, vocab) {
  /** @type {Map<string, {list: string[], set: Set<string>}>} */
  const sets = new Map();
  return () => {
    /** @type {Record<string, any>} */
    const st = {};
    for (const key of vocab.state) {
      const value = stateValue(key, model.get(key.name));
      if (key.type !== "paths") {
        st[key.name] = value;
        continue;
      }
      let held = sets.get(key.name);
      if (!held || held.list !== value) sets.set(key.name, (held = { list: value, set: new Set(value) }));
      st[key.name] = held.set;
      st[key.name + "List"] = value;
    }
    return /** @type {FullState} */ (st);
  };
}
