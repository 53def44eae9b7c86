// runtime/ckpt/Boxes.cpp: see the headers of runtime/ckpt/.
