// Facts about the front end's hand-written sources, read with TypeScript's parser (js/node_modules):
// per file its line count, its functions with their line counts, and every string literal with the
// place it stands in. tests/test_frontend.py checks them (file and function sizes, vocabulary
// spelled as literals); `node tests/js/source_facts.mjs FILE...` prints them as JSON.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(new URL("../../js/package.json", import.meta.url));
const ts = require("typescript");

/**
 * Where a literal stands, in words a check can match: "tag" (the first argument of h() or svg(),
 * an element name), "attribute:<key>" (the value of a property of an object literal, or of
 * setAttribute(key, ...)), "template" (a fixed part of a template literal), or "" for anywhere
 * else.
 * @param {any} node
 */
function placeOf(node) {
  let parent = node.parent;
  // A value chosen by a condition (`open ? "a" : "b"`) stands where the condition stands.
  while (ts.isConditionalExpression(parent) || ts.isParenthesizedExpression(parent)) parent = parent.parent;
  if (ts.isCallExpression(parent) && ts.isPropertyAccessExpression(parent.expression) && parent.expression.name.text === "setAttribute"
    && parent.arguments[1] !== undefined && node.pos >= parent.arguments[1].pos && ts.isStringLiteral(parent.arguments[0])) return "attribute:" + parent.arguments[0].text;
  if (ts.isCallExpression(parent) && parent.arguments[0] === node && ts.isIdentifier(parent.expression) && ["h", "svg"].includes(parent.expression.text)) return "tag";
  if (ts.isPropertyAssignment(parent) && parent.initializer === node) {
    const key = parent.name;
    return "attribute:" + (ts.isIdentifier(key) || ts.isStringLiteral(key) ? key.text : "?");
  }
  return "";
}

/** @param {string} file */
export function sourceFacts(file) {
  const text = readFileSync(file, "utf-8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.JS);
  const line = (/** @type {number} */ pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const functions = [];
  const literals = [];
  /** @param {any} node */
  const visit = (node) => {
    if (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) || ts.isMethodDeclaration(node)
      || ts.isGetAccessor(node) || ts.isSetAccessor(node) || ts.isConstructorDeclaration(node)) {
      let name = node.name ? node.name.getText(source) : "";
      if (!name && ts.isVariableDeclaration(node.parent)) name = node.parent.name.getText(source);
      if (!name && ts.isPropertyAssignment(node.parent)) name = node.parent.name.getText(source);
      if (!name && ts.isConstructorDeclaration(node)) name = "constructor";
      const start = line(node.getStart(source));
      functions.push({ name: name || "(anonymous)", line: start, lines: line(node.getEnd()) - start + 1 });
    }
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      literals.push({ text: node.text, line: line(node.getStart(source)), place: placeOf(node) });
    } else if (ts.isTemplateExpression(node)) {
      // The fixed parts of a template: `tp-k-${kind}` spells no name whole.
      for (const part of [node.head, ...node.templateSpans.map((s) => s.literal)]) literals.push({ text: part.text, line: line(part.getStart(source)), place: "template" });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { file, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0), functions, literals };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(JSON.stringify(process.argv.slice(2).map(sourceFacts)));
}
