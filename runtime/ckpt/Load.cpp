// runtime/ckpt/Load.cpp: see the headers of runtime/ckpt/.
