-- memlint's language server for Neovim 0.11+ (`vim.lsp.config` / `vim.lsp.enable`).
-- Put this folder on 'runtimepath' (or copy this file to ~/.config/nvim/lsp/), then:
--   vim.lsp.enable('memlint')
-- Override anything with vim.lsp.config('memlint', { init_options = { ignore = { 'MEM004' } } }).
return {
  cmd = { 'memlint', 'server' },
  filetypes = { 'python' },
  root_markers = { 'memlint.toml', '.memlint.toml', 'pyproject.toml', '.git' },
  -- Read by the server at startup; `workspace/didChangeConfiguration` changes them later.
  init_options = {
    -- select = { 'MEM001', 'MEM002' },  -- rules to run (codes or names); default: all
    -- ignore = { 'MEM004' },            -- rules to skip
    -- unsafeFixes = false,              -- include unsafe fixes in "fix all"
    -- configPath = 'memlint.toml',      -- a configuration file instead of discovery
  },
}
