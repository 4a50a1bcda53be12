-- repl.lua -- a line-at-a-time evaluator for the crash tests: each input
-- line is an expression (printed) or a statement.
for line in io.lines() do
  local f = load("return " .. line) or load(line)
  if f then
    local ok, r = pcall(f)
    if not ok then print("error") elseif r ~= nil then print(r) end
  else
    print("?")
  end
end
