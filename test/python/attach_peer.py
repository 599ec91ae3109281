"""A Python program started by nobody's queue: it knows only names (argv), attaches to a Node
program's Queue, Pipe end and Event, writes into what it receives and answers with arrays it
makes (test/python/attach.test.ts)."""
import sys

import numpy as np

import tensorproc as tp

prefix = sys.argv[1]
try:
    tp.attach(prefix + "-missing", timeout=0)
except tp.NameNotFoundError as e:
    missing = e.code
work = tp.attach(prefix + "-work")
pipe = tp.attach(prefix + "-pipe")
done = tp.attach(prefix + "-done")
errors = {}
try:
    work.put({"f": object()})  # refused before anything is sent
except tp.NotTransferableError as e:
    errors["object"] = e.code
try:
    work.put(2**60)
except tp.NotTransferableError as e:
    errors["int"] = e.code
t = work.get()  # a Node tensor, as a numpy array over the same memory
t += 1  # seen by Node
mine = tp.empty((2, 2), "int64")
mine[...] = [[1, 2], [3, 4]]
try:
    work.get(timeout=0)
except tp.QueueEmpty as e:
    errors["empty"] = e.code
pipe.send({"errors": errors, "missing": missing, "sum": float(t.sum()), "mine": mine})
assert pipe.recv() == "written"
pipe.send(mine.tolist())  # what Node wrote into our array
done.set()
