// runtime/ckpt/Reader.cpp: see the headers of runtime/ckpt/.
