// Bundles the extension host code (Node, CommonJS, `vscode` external) and the panel's webview
// script (browser, IIFE) with esbuild. `--production` minifies; otherwise sourcemaps are inline.
// VS Code's codicons (the @vscode/codicons package: its CSS and font) are copied to dist/codicons,
// where the webview loads them from the extension's own resource root.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const production = process.argv.includes("--production");
const common = { bundle: true, minify: production, sourcemap: production ? false : "inline", logLevel: "warning", legalComments: "none" };

await Promise.all([
  esbuild.build({ ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", format: "cjs", target: "node20", external: ["vscode"] }),
  esbuild.build({ ...common, entryPoints: ["webview/main.ts"], outfile: "dist/webview.js", platform: "browser", format: "iife", target: "es2022" }),
]);
mkdirSync("dist/codicons", { recursive: true });
for (const f of ["codicon.css", "codicon.ttf"]) copyFileSync(`node_modules/@vscode/codicons/dist/${f}`, `dist/codicons/${f}`);
console.log(`built dist/extension.js and dist/webview.js${production ? " (production)" : ""}`);
