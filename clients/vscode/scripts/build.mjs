// Bundles the extension host code (Node, CommonJS, `vscode` external) and the panel's webview
// script (browser, IIFE) with esbuild. `--production` minifies; otherwise sourcemaps are inline.
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");
const common = { bundle: true, minify: production, sourcemap: production ? false : "inline", logLevel: "warning", legalComments: "none" };

await Promise.all([
  esbuild.build({ ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", format: "cjs", target: "node20", external: ["vscode"] }),
  esbuild.build({ ...common, entryPoints: ["webview/main.ts"], outfile: "dist/webview.js", platform: "browser", format: "iife", target: "es2022" }),
]);
console.log(`built dist/extension.js and dist/webview.js${production ? " (production)" : ""}`);
