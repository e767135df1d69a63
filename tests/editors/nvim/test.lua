-- Headless Neovim test of memlint's language server with the plugin from editors/nvim:
-- open a training script, wait for memlint's diagnostics, apply a MEM004 quick fix, "fix
-- all" and "disable MEM002 for this line" through Neovim's own code-action machinery, and
-- check the buffer. Exits 0 on success, 1 on any failure (see run.sh).
local bin = assert(os.getenv('MEMLINT_BIN'), 'MEMLINT_BIN is not set')
local plugin = assert(os.getenv('MEMLINT_PLUGIN'), 'MEMLINT_PLUGIN is not set')
local file = assert(os.getenv('MEMLINT_TEST_FILE'), 'MEMLINT_TEST_FILE is not set')
local expect_pull = os.getenv('MEMLINT_EXPECT_PULL') == '1'

local function log(msg)
  io.stdout:write('[nvim ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor) .. '] ' .. msg .. '\n')
end

local function wait_for(what, ms, cond)
  if not vim.wait(ms, cond, 50) then
    error('timed out after ' .. ms .. ' ms waiting for ' .. what, 2)
  end
end

local function codes(buf)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.source == 'memlint' then
      table.insert(found, tostring(d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)))
    end
  end
  table.sort(found)
  return table.concat(found, ',')
end

local function memlint_client(buf)
  -- get_clients is 0.10+; buf_get_clients (a map by id) is what 0.7 has.
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = buf }) or vim.lsp.buf_get_clients(buf)
  for _, c in pairs(clients) do
    if c.name == 'memlint' then
      return c
    end
  end
end

-- Runs the code action of `kind` titled `title` on the cursor's line, as a user picking
-- it would.
local function apply_action(buf, kind, title)
  local before = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  local picked = false
  local seen = {}
  if vim.fn.has('nvim-0.8') == 1 then
    vim.lsp.buf.code_action({
      context = { only = { kind } },
      filter = function(action)
        table.insert(seen, action.title)
        return action.title == title
      end,
      apply = true,
    })
    picked = true
  else
    -- 0.7 has no filter/apply: answer its vim.ui.select menu instead.
    local select = vim.ui.select
    vim.ui.select = function(items, opts, on_choice)
      vim.ui.select = select
      for i, item in ipairs(items) do
        local action = item[2] or item
        table.insert(seen, action.title)
        if action.title == title then
          picked = true
          return on_choice(item, i)
        end
      end
      on_choice(nil, nil)
    end
    vim.lsp.buf.code_action({ only = { kind } })
  end
  wait_for('the action "' .. title .. '" to change the buffer', 15000, function()
    return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') ~= before
  end)
  assert(picked, 'no action titled "' .. title .. '" among: ' .. table.concat(seen, ' | '))
end

local function main()
  vim.opt.swapfile = false
  vim.opt.runtimepath:prepend(plugin)
  vim.lsp.set_log_level('warn')
  if vim.lsp.config and vim.lsp.enable then
    -- 0.11+: the shipped lsp/memlint.lua, found on 'runtimepath', with the test's binary.
    vim.lsp.config('memlint', { cmd = { bin, 'server' } })
    vim.lsp.enable('memlint')
    log('using lsp/memlint.lua with vim.lsp.enable')
  else
    require('memlint').setup({ cmd = { bin, 'server' } })
    log('using require("memlint").setup()')
  end
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  -- -u NONE: no filetype detection, so say it; this starts the client.
  vim.bo[buf].filetype = 'python'

  wait_for('memlint to attach', 15000, function() return memlint_client(buf) ~= nil end)
  local client = memlint_client(buf)
  wait_for('MEM002 and two MEM004 (got "' .. codes(buf) .. '")', 20000, function() return codes(buf) == 'MEM002,MEM004,MEM004' end)
  log('diagnostics: ' .. codes(buf))

  local caps = client.server_capabilities or client.resolved_capabilities
  local pulls = caps.diagnosticProvider ~= nil
  assert(pulls == expect_pull, 'diagnosticProvider offered: ' .. tostring(pulls) .. ', expected ' .. tostring(expect_pull))
  if expect_pull then
    -- The diagnostics must have come through textDocument/diagnostic (the pull namespace).
    local ns = vim.lsp.diagnostic.get_namespace(client.id, true)
    assert(#vim.diagnostic.get(buf, { namespace = ns }) == 3, 'no diagnostics in the pull namespace')
    log('diagnostics were pulled')
  end

  local function row_of(text)
    for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
      if l:find(text, 1, true) then return i end
    end
    error('no line with ' .. text)
  end
  local function count(text)
    local n = 0
    for _, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
      if l:find(text, 1, true) then n = n + 1 end
    end
    return n
  end

  -- Quick fix for the first MEM004: exactly its line goes.
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  vim.api.nvim_win_set_cursor(0, { row_of('empty_cache'), 12 })
  apply_action(buf, 'quickfix', 'Remove the `empty_cache()` call (MEM004)')
  assert(count('empty_cache') == 1, 'the quick fix should remove one empty_cache() call')
  assert(#vim.api.nvim_buf_get_lines(buf, 0, -1, false) == #lines - 1, 'the quick fix should remove exactly one line')
  wait_for('MEM002 and MEM004 after the fix (got "' .. codes(buf) .. '")', 20000, function() return codes(buf) == 'MEM002,MEM004' end)
  log('quick fix applied: ' .. codes(buf))

  -- Fix all (safe fixes only by default): the other empty_cache() goes, MEM002 stays.
  -- Clients that resolve code actions lazily get the edit from codeAction/resolve.
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  apply_action(buf, 'source.fixAll.memlint', 'memlint: fix all auto-fixable problems')
  assert(count('empty_cache') == 0, 'fix all left an empty_cache() call')
  assert(count('total += loss') == 1, 'fix all applied the unsafe fix')
  wait_for('only MEM002 after fix all (got "' .. codes(buf) .. '")', 20000, function() return codes(buf) == 'MEM002' end)
  log('fix all applied: ' .. codes(buf))

  -- Suppress MEM002 on its line.
  local loss_row = row_of('total += loss')
  vim.api.nvim_win_set_cursor(0, { loss_row, 10 })
  apply_action(buf, 'quickfix', 'Disable MEM002 for this line')
  local suppressed = vim.api.nvim_buf_get_lines(buf, loss_row - 1, loss_row, false)[1]
  assert(suppressed == '        total += loss  # noqa: MEM002', 'unexpected line: ' .. suppressed)
  wait_for('no diagnostics after the noqa (got "' .. codes(buf) .. '")', 20000, function() return codes(buf) == '' end)
  log('noqa applied; no findings left')

  vim.cmd('write')
  log('ok')
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  io.stderr:write('FAIL: ' .. tostring(err) .. '\n')
  vim.cmd('cquit 1')
end
vim.cmd('qall!')
