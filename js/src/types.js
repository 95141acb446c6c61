// @ts-check
// The types the modules share (JSDoc only: this module exports nothing at run time). A type used by
// one module only lives in that module.
export {};

/**
 * One column of the registry (src/torchprof/_vocab.py `Column`).
 * @typedef {object} ColumnSpec
 * @property {string} name
 * @property {string} label
 * @property {string} unit "time" | "bytes" | "count" | "int" | "text" | "bool"
 * @property {string} about
 * @property {string} dtype "float" | "int" | "str" | "bool"
 * @property {string} rollup "total" | "self" | "count" | "max" | "none"
 * @property {string} [family] "cpu" | "cuda" | "bwd" | "mem"
 * @property {string} [percent_of]
 * @property {string} [layer_alt]
 * @property {boolean} sortable
 * @property {boolean} threshold
 * @property {string} [needs]
 * @property {boolean} [delta] a change between two runs: coloured faster/slower
 * @property {string} [subtree] for a self column: the same quantity over the whole subtree
 * @property {boolean} [unknown] NaN in it means unknown (work of unknown cost), written `unknown_mark`
 */

/**
 * The columns the front end's rules single out, by the part they play (src/torchprof/_vocab.py
 * `COLUMN_ROLES`). A role whose column a table lacks (a comparison has no execution order) is
 * simply absent from that table's data.
 * @typedef {object} Roles
 * @property {string} path @property {string} name @property {string} kind @property {string} parent
 * @property {string} depth @property {string} backward
 * @property {string} type the module's class
 * @property {string} shapes input shapes
 * @property {string} source the user's line
 * @property {string} order the order nodes first ran in
 * @property {string} calls how many times a node ran (shown whenever there are rows)
 * @property {string} flops
 * @property {string} macs shown in the FLOPs cell's tooltip
 */

/**
 * One key of the view state (src/torchprof/_vocab.py `StateKey`).
 * @typedef {object} StateKeySpec
 * @property {string} name
 * @property {string} type "float" | "text" | "bool" | "paths"
 * @property {any} default
 */

/**
 * What the payload says of the registry (src/torchprof/_views/payload.py `vocabulary`).
 * @typedef {object} Vocab
 * @property {ColumnSpec[]} columns every prof.df column, in order
 * @property {string[]} view_columns the table's columns, in order
 * @property {string[]} number_columns the numeric columns the payload carries (`num`)
 * @property {string[]} text_columns the text columns the payload carries (`text`)
 * @property {Roles} roles
 * @property {string[]} kinds kind names by code
 * @property {string[]} layer_kinds kinds kept when operator rows are hidden
 * @property {string} module_kind the kind of an nn.Module's row
 * @property {string} step_kind the kind of a ProfilerStep row
 * @property {Record<string, string>} sort_aliases
 * @property {StateKeySpec[]} state
 * @property {{kind: number, backward: number, absolute_path: number, name_in_tail: number}} flags
 * @property {string} csv_formula_start first characters that make a spreadsheet run a cell
 * @property {string[]} views the views, in the switcher's order
 * @property {string[]} flame_colours
 * @property {string} all_steps the `step` value of every step folded into one tree
 * @property {string} step_prefix name prefix of the iteration regions
 * @property {string} backward_prefix name prefix of the autograd engine's per-node backward ranges
 * @property {string} path_search prefix of a search on paths
 * @property {string} threshold_column what min_pct compares
 * @property {string[]} [insight_columns] the keys of a finding (prof.insights() columns)
 * @property {string[]} [step_parts] the keys of a step's time split, in stacking order
 * @property {string[]} [step_extra] a step's device idle time and slow flag keys
 * @property {string[]} [memory_categories] what a memory peak is made of, in stacking order
 * @property {string} [unknown_mark] written for a missing value of a column whose NaN means unknown
 */

/**
 * A payload as Python writes it (JSON form; the binary form points into buffers instead). Fields
 * this list does not name (a view's own data) are read from `Data.fields`.
 * @typedef {object} Payload
 * @property {string} format
 * @property {number} n
 * @property {any} parent
 * @property {any} flags
 * @property {string[]} tail
 * @property {[number, string][]} names
 * @property {Record<string, (string|null)[]>} text the other text columns (type, module, input_shapes, source); [] = all null
 * @property {Record<string, any>} num
 * @property {Vocab} vocab
 * @property {Record<string, any>} [summary]
 * @property {[string, string, string][]} [summary_items]
 * @property {any[]} [steps]
 * @property {any} [all_steps] every step folded into one tree: a table plus low, high, runs, count
 * @property {any} [memory] the Memory view's data (_views/memory.py memory_payload)
 */

/**
 * The decoded table every function works on.
 * @typedef {object} Data
 * @property {number} n
 * @property {Int32Array} parent
 * @property {Uint8Array} kind
 * @property {Uint8Array} backward
 * @property {Int32Array} depth
 * @property {Int32Array} end one past the last row of each row's subtree (rows are in pre-order)
 * @property {string[]} path
 * @property {string[]} name
 * @property {Record<string, Float64Array>} num
 * @property {Record<string, boolean>} allNaN
 * @property {Int32Array} childStart
 * @property {Int32Array} childIndex
 * @property {Record<string, (string|null)[]>} text text columns by name (all null where the payload sent none)
 * @property {(string|null)[]} type
 * @property {(string|null)[]} shapes
 * @property {(string|null)[]} source
 * @property {Vocab} vocab
 * @property {Roles} roles the vocabulary's roles
 * @property {Record<string, ColumnSpec>} spec columns by name
 * @property {Set<number>} layerCodes kind codes of layers (modules and regions)
 * @property {number} moduleCode the kind code of modules
 * @property {number} stepCode the kind code of ProfilerStep rows
 * @property {Record<string, any>} summary
 * @property {[string, string, string][]} summaryItems
 * @property {any[]} steps
 * @property {Record<string, any>} cache lower-cased text columns, natural keys, ... made on demand
 * @property {Folded|null} folded every step folded into one tree (two steps or more)
 * @property {import("./views/memory.js").MemoryData|null} memory the Memory view's data (null without memory=True)
 * @property {Record<string, any>} fields the payload's header as sent: what a view reads of its own
 */

/**
 * Every step folded into one tree (src/torchprof/_tree/aggregate.py `across_steps`): a table of
 * means, the least and most of any step for the time columns, and how many steps ran each node.
 * @typedef {object} Folded
 * @property {Data} table
 * @property {Record<string, Float64Array>} low
 * @property {Record<string, Float64Array>} high
 * @property {number[]} runs
 * @property {number} count
 */

/**
 * The view state (the widget's synced traits); `expanded` as a Set of paths, null = all open.
 * `root` is the row the view starts from (a step's row; 0 = the whole run).
 * @typedef {object} ViewState
 * @property {number} [min_pct]
 * @property {string|string[]|null} [sort_by]
 * @property {boolean} [ascending]
 * @property {boolean} [show_ops]
 * @property {string|string[]} [search]
 * @property {Set<string>|null} [expanded]
 * @property {number|null} [max_depth]
 * @property {number} [root]
 */

/**
 * The view state as the DOM reads it: every key of the vocabulary's `state`, a `paths` key (as
 * `expanded`) as a Set and, under `<key>List`, as the model's list.
 * @typedef {ViewState & {expanded: Set<string>, expandedList: string[], view: string, step: string, selected: string,
 *   metric: string, flame_colour: string, zoom: string, search: string, min_pct: number, sort_by: string}} FullState
 */

/**
 * The slice of anywidget's model API the view uses.
 * @typedef {object} Model
 * @property {(key: string) => any} get
 * @property {(key: string, value: any) => void} set
 * @property {(event: string, cb: () => void) => void} on
 * @property {(event?: string, cb?: () => void) => void} off
 * @property {() => void} save_changes
 */

/**
 * The part of the run a view shows: the table (the profile's, or the folded steps') and the row
 * it starts from.
 * @typedef {{table: Data, root: number, folded: Folded|null}} Viewed
 */

/**
 * What the filters show of the viewed table (rows.js `visibleRows`).
 * @typedef {{rows: number[], hasKids: Uint8Array, shown: Uint8Array}} Visible
 */

/**
 * What every view of a mounted widget shares.
 * @typedef {object} Context
 * @property {HTMLElement} root
 * @property {Model} model
 * @property {Data} data
 * @property {() => FullState} state
 * @property {(values: Record<string, any>) => void} change sets model values and saves them
 * @property {string} view the vocabulary's name of the view being made
 * @property {string} rowsView the view that lists rows (where "show in the table" goes)
 */

/**
 * A view's face: its element, a redraw for a state, a repaint after a resize, and clean-up.
 * @typedef {object} ViewFace
 * @property {HTMLElement} el
 * @property {(st: FullState, viewed: Viewed, vis: Visible) => void} update
 * @property {() => void} resized
 * @property {() => void} destroy
 */

/**
 * The controls above the views that a view acts on (controls.js shows each only in the views
 * that list it).
 * @typedef {object} ControlUse
 * @property {boolean} [threshold] the min-% slider
 * @property {boolean} [ops] the "aten ops" toggle
 * @property {boolean} [search] the find box
 * @property {boolean} [sort] the sort picker
 * @property {boolean} [expand] "Expand all" and "Collapse all"
 * @property {boolean} [rowCount] "N of M rows"
 * @property {boolean} [hiddenNote] "N rows hidden (...)"
 */

/**
 * One view of the widget: a module of js/src/views/, listed in views/index.js under its
 * vocabulary name. The switcher offers it where the payload's `views` name it and `offered`
 * (when given) says the payload has what it shows.
 * @typedef {object} ViewModule
 * @property {(ctx: Context) => ViewFace} create
 * @property {ControlUse} [controls]
 * @property {(data: Data) => boolean} [offered]
 * @property {boolean} [listsRows] the view rows are shown in when another view opens one
 * @property {(data: Data) => string} [badge] a count its switcher button shows ("" for none)
 */
