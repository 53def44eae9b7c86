// Image datasets in the idx format (LeCun's MNIST format, also used by Fashion-MNIST),
// gzip-compressed, read with zlib.
//
// Promise: every header field is checked (magic number, dimension counts, sizes against
// the bytes present, image and label counts agree, labels within the class count) and any
// violation is a tessel::DataError naming the file and the field.
#pragma once

#include "runtime/data/TextDataset.h"  // DataError

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tessel {

/// Images with labels. images is [count, rows * cols] row-major, pixel bytes scaled to
/// [0, 1]; labels is [count].
struct ImageDataset {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<float> images;
  std::vector<int32_t> labels;

  int64_t pixels() const { return rows * cols; }
};

/// Reads a gzip-compressed idx3 image file and idx1 label file. Throws DataError.
ImageDataset readIdxImages(const std::string& imagesGz, const std::string& labelsGz,
                           int32_t numClasses = 10);

/// Fashion-MNIST from a folder holding {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
/// (Debian's dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist).
ImageDataset readFashionMnist(const std::string& dir, Split split);

/// A batch of images [B, rows*cols] and labels [B].
struct ImageBatch {
  int64_t batch = 0;
  std::vector<float> images;
  std::vector<int32_t> labels;
};

/// Examples [first, first + batch) of `order` (a permutation of [0, count)), wrapping around.
ImageBatch gatherImages(const ImageDataset& data, const std::vector<int64_t>& order,
                        int64_t first, int64_t batch);

}  // namespace tessel
