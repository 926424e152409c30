// CSS imports are bundled by esbuild into the stylesheet index.html links.
declare module "*.css";
