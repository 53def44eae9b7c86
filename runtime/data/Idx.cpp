// idx (MNIST-format) readers; see Idx.h.
#include "runtime/data/Idx.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <zlib.h>

namespace tessel {
namespace {

/// The whole decompressed content of a gzip file (zlib's gzread also passes plain files).
std::vector<uint8_t> readGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    throw DataError(fmt::format("cannot open data file '{}': {}", path,
                                errno ? std::strerror(errno) : "gzopen failed"));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      throw DataError(fmt::format("cannot decompress '{}': {}", path, msg));
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  gzclose(f);
  return out;
}

uint32_t bigEndian32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) |
         uint32_t{b[at + 3]};
}

}  // namespace

ImageDataset readIdxImages(const std::string& imagesGz, const std::string& labelsGz,
                           int32_t numClasses) {
  std::vector<uint8_t> img = readGz(imagesGz);
  std::vector<uint8_t> lab = readGz(labelsGz);
  if (img.size() < 16 || bigEndian32(img, 0) != 0x00000803)
    throw DataError(fmt::format("'{}' is not an idx3 image file (bad magic number or header)",
                                imagesGz));
  if (lab.size() < 8 || bigEndian32(lab, 0) != 0x00000801)
    throw DataError(fmt::format("'{}' is not an idx1 label file (bad magic number or header)",
                                labelsGz));
  ImageDataset d;
  d.count = bigEndian32(img, 4);
  d.rows = bigEndian32(img, 8);
  d.cols = bigEndian32(img, 12);
  int64_t labels = bigEndian32(lab, 4);
  if (d.count <= 0 || d.rows <= 0 || d.cols <= 0)
    throw DataError(fmt::format("'{}' declares an empty data set ({} images of {}x{})", imagesGz,
                                d.count, d.rows, d.cols));
  if (static_cast<int64_t>(img.size()) - 16 != d.count * d.rows * d.cols)
    throw DataError(fmt::format("'{}' declares {} images of {}x{} ({} bytes) but holds {}",
                                imagesGz, d.count, d.rows, d.cols, d.count * d.rows * d.cols,
                                img.size() - 16));
  if (labels != d.count || static_cast<int64_t>(lab.size()) - 8 != labels)
    throw DataError(fmt::format("'{}' holds {} labels ({} declared) for {} images in '{}'",
                                labelsGz, lab.size() - 8, labels, d.count, imagesGz));
  d.images.resize(img.size() - 16);
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = static_cast<float>(img[16 + i]) / 255.0f;
  d.labels.resize(labels);
  for (int64_t i = 0; i < labels; ++i) {
    d.labels[i] = lab[8 + i];
    if (d.labels[i] >= numClasses)
      throw DataError(fmt::format("'{}': label {} of example {} is not below {} classes",
                                  labelsGz, d.labels[i], i, numClasses));
  }
  return d;
}

ImageDataset readFashionMnist(const std::string& dir, Split split) {
  std::string prefix = split == Split::Train ? "train" : "t10k";
  return readIdxImages(fmt::format("{}/{}-images-idx3-ubyte.gz", dir, prefix),
                       fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, prefix));
}

ImageBatch gatherImages(const ImageDataset& data, const std::vector<int64_t>& order,
                        int64_t first, int64_t batch) {
  ImageBatch b;
  b.batch = batch;
  b.images.reserve(batch * data.pixels());
  for (int64_t i = 0; i < batch; ++i) {
    int64_t e = order[(first + i) % static_cast<int64_t>(order.size())];
    b.images.insert(b.images.end(), data.images.begin() + e * data.pixels(),
                    data.images.begin() + (e + 1) * data.pixels());
    b.labels.push_back(data.labels[e]);
  }
  return b;
}

}  // namespace tessel
