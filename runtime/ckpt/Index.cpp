// runtime/ckpt/Index.cpp: see the headers of runtime/ckpt/.
