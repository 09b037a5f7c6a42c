#include "services/scheduler/watch_journal.h"

#include <algorithm>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace dhpt::scheduler {

WatchEventPtr FrameWatchEvent(const v1::StudyEvent& event) {
  auto framed = std::make_shared<WatchEvent>();
  framed->position = event.position();
  framed->summary = event.has_study();
  if (event.has_trial()) framed->trial = event.trial().number();
  // WatchStudyResponse.events is field 1, length-delimited: a response is these concatenated.
  constexpr uint32_t kEventsTag = (v1::WatchStudyResponse::kEventsFieldNumber << 3) | 2;
  const size_t size = event.ByteSizeLong();
  {
    google::protobuf::io::StringOutputStream stream(&framed->framed);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag(kEventsTag);
    out.WriteVarint64(size);
  }
  const size_t header = framed->framed.size();
  framed->framed.resize(header + size);
  event.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(framed->framed.data() + header));
  return framed;
}

void WatchJournal::Reset(uint64_t position) {
  events_.clear();
  events_.shrink_to_fit();
  bytes_ = 0;
  complete_after_ = position;
}

void WatchJournal::Append(WatchEventPtr event) {
  bytes_ += event->framed.size();
  events_.push_back(std::move(event));
  while (events_.size() > 1 &&
         (events_.size() > limits_.max_events || bytes_ > limits_.max_bytes)) {
    complete_after_ = events_.front()->position;
    bytes_ -= events_.front()->framed.size();
    events_.pop_front();
  }
}

uint64_t WatchJournal::Read(uint64_t position, bool summaries_only, size_t max_bytes,
                            std::vector<WatchEventPtr>& out) const {
  auto it = std::upper_bound(
      events_.begin(), events_.end(), position,
      [](uint64_t p, const WatchEventPtr& event) { return p < event->position; });
  std::vector<WatchEventPtr> read;
  size_t taken = 0;
  for (; it != events_.end(); ++it) {
    if (taken > 0 && taken + (*it)->framed.size() > max_bytes) break;
    position = (*it)->position;
    if (summaries_only && !(*it)->summary) continue;
    taken += (*it)->framed.size();
    read.push_back(*it);
  }
  // Latest first: an event is kept unless a later one of the same trial (or summary) was.
  absl::flat_hash_set<int64_t> kept;
  std::vector<WatchEventPtr> latest;
  for (auto event = read.rbegin(); event != read.rend(); ++event) {
    if (kept.insert((*event)->trial).second) latest.push_back(std::move(*event));
  }
  out.insert(out.end(), std::make_move_iterator(latest.rbegin()),
             std::make_move_iterator(latest.rend()));
  return position;
}

}  // namespace dhpt::scheduler
