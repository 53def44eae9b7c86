// runtime/ckpt/Commit.cpp: see the headers of runtime/ckpt/.
