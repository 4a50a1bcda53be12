# campaign input for python3 (read from standard input: python3 -)
with open("out.txt", "w") as f:
    x = 1
    for k in range(1, 41):
        for i in range(150000):
            x = (x * x + k + i) % 1000000007
        line = "%2d %d" % (k, x)
        print(line, flush=True)
        f.write(line + "\n")
        f.flush()
