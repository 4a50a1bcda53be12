-- campaign input for lua5.4 (read from standard input: lua5.4 -)
io.stdout:setvbuf("line")
local f = assert(io.open("out.txt", "w"))
local t = {}
for k = 1, 40 do
  local s = 0
  for i = 1, 1200000 do s = (s * 31 + i * k) % 1000003 end
  t[k] = s
  print(string.format("%2d %7d %d", k, s, #t))
  f:write(k, " ", s, "\n")
end
f:close()
