// Bundles js/src/ (the front end's modules) into js/widget.js, the one ES module the wheel ships,
// anywidget loads and `prof.to_html()` inlines. The bundle is checked in: tests/test_frontend.py
// builds it again into a temporary file and fails when the two differ.
//   node build.mjs                 write js/widget.js
//   node build.mjs --outfile PATH  write PATH instead (the staleness test)
import { build } from "esbuild";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf("--outfile");
const outfile = at > 0 ? process.argv[at + 1] : join(here, "widget.js");

await build({
  absWorkingDir: here,
  entryPoints: ["src/widget.js"],
  outfile,
  bundle: true,
  format: "esm",
  target: "es2022",
  charset: "utf8",
  legalComments: "none",
  logLevel: "warning",
  banner: { js: "// torchprof's front end, bundled by js/build.mjs from js/src/ (esbuild): edit the sources, then `npm run build` in js/." },
});

// The report page appends a few lines that call render() and createModel() by name in the same
// <script type="module"> (src/torchprof/_views/html.py _BOOT): they must keep those names.
const bundle = readFileSync(outfile, "utf-8");
for (const name of ["render", "createModel"]) {
  if (!new RegExp(`^(async )?function ${name}\\(`, "m").test(bundle)) throw new Error(`the bundle renamed ${name}(): html.py's boot code calls it by name`);
}
