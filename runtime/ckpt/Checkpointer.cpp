// runtime/ckpt/Checkpointer.cpp: see the headers of runtime/ckpt/.
