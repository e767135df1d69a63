-- memlint's language server for Neovim 0.7 to 0.10 (and later, without vim.lsp.config):
--   require('memlint').setup({ cmd = { '/path/to/memlint', 'server' }, init_options = { ignore = { 'MEM004' } } })
-- Starts (or reuses) one client per project root for every Python buffer.
local M = {}

local defaults = {
  name = 'memlint',
  cmd = { 'memlint', 'server' },
  filetypes = { 'python' },
  root_markers = { 'memlint.toml', '.memlint.toml', 'pyproject.toml', '.git' },
  init_options = vim.empty_dict(),
}

M.config = vim.deepcopy(defaults)

-- The folder holding the nearest root marker above `path`, else the file's folder.
-- (vim.fs.find is 0.8+; findfile/finddir with `;` search upward on 0.7 too.)
function M.root_dir(path, markers)
  local dir = vim.fn.fnamemodify(path, ':p:h')
  local best
  for _, marker in ipairs(markers) do
    local found = vim.fn.findfile(marker, dir .. ';')
    if found == '' then
      found = vim.fn.finddir(marker, dir .. ';')
    end
    if found ~= '' then
      local root = vim.fn.fnamemodify(found, ':p:h')
      if vim.fn.isdirectory(found) == 1 then
        root = vim.fn.fnamemodify(found, ':p:h:h')
      end
      if not best or #root > #best then
        best = root
      end
    end
  end
  return best or dir
end

-- Starts memlint for buffer `bufnr` (0: current) and returns the client id.
function M.start(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local config = M.config
  local name = vim.api.nvim_buf_get_name(bufnr)
  local root = M.root_dir(name ~= '' and name or vim.fn.getcwd() .. '/x', config.root_markers)
  local client_config = {
    name = config.name,
    cmd = config.cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = config.init_options,
    on_attach = config.on_attach,
    capabilities = config.capabilities,
  }
  if vim.lsp.start then
    -- 0.8+: reuses a running client with the same name and root.
    return vim.lsp.start(client_config, { bufnr = bufnr })
  end
  -- 0.7: start_client + buf_attach_client, one client per root.
  M._clients = M._clients or {}
  local id = M._clients[root]
  if not id or vim.lsp.client_is_stopped(id) then
    id = vim.lsp.start_client(client_config)
    M._clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

-- Options: any of `cmd`, `filetypes`, `root_markers`, `init_options`, `on_attach`,
-- `capabilities`. Attaches to matching buffers opened from now on and to those open now.
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup('memlint', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      M.start(args.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(M.config.filetypes, vim.bo[buf].filetype) then
      M.start(buf)
    end
  end
end

return M
