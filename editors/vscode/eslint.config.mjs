import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["out/**", "node_modules/**", "*.vsix"] },
  js.configs.recommended,
  {
    files: ["src/**/*.ts"],
    extends: [...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { project: "./tsconfig.json", tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      eqeqeq: "error",
    },
  },
  {
    files: ["test/**/*.js", "scripts/**/*.js", "*.mjs", "test/**/*.mjs"],
    languageOptions: { globals: { ...globals.node }, sourceType: "commonjs" },
    rules: { eqeqeq: "error" },
  },
  {
    files: ["*.mjs", "test/**/*.mjs"],
    languageOptions: { sourceType: "module" },
  },
);
