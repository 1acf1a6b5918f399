#include "scenarios/behaviour.h"

#include <cstring>

#include "dispute/provider_session.h"
#include "engine/job.h"
#include "nodes/train_set.h"

namespace tribunal::scenarios {

// The parroted provider's answers to the same queries, from its store, signed with our key.
struct BehaviourState::Mirror {
  std::unique_ptr<ThreadPool> pool;
  std::shared_ptr<const Dataset> data;
  std::unique_ptr<ProviderDisputeSession> session;
};

namespace {

Digest flipped(Digest d) {
  d[0] ^= 0x01;
  return d;
}

Digest random_digest(std::mt19937_64& rng) {
  Digest d{};
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  return d;
}

uint32_t round_of(const Body& body) {
  return std::visit(
      [](const auto& b) -> uint32_t {
        if constexpr (requires { b.round; }) return b.round;
        return 0;
      },
      body);
}

void set_round(Body& body, uint32_t round) {
  std::visit(
      [round](auto& b) {
        if constexpr (requires { b.round; }) b.round = round;
      },
      body);
}

bool is_lie_kind(AnswerKind k) {
  return k == AnswerKind::BadProof || k == AnswerKind::Equivocate || k == AnswerKind::ZeroHashes ||
         k == AnswerKind::BadHandoff || k == AnswerKind::ForgedBytes || k == AnswerKind::NanBytes ||
         k == AnswerKind::BadRecord;
}

bool is_malformed_kind(AnswerKind k) {
  return k == AnswerKind::Truncated || k == AnswerKind::Oversized || k == AnswerKind::BadSignature ||
         k == AnswerKind::ForeignKey || k == AnswerKind::ReplayRound || k == AnswerKind::ReplayDispute ||
         k == AnswerKind::WrongRound;
}

// Rewrites one answer body as the lie `kind`; false if this body is not the kind of answer the lie
// needs (the lie waits for one that is).
bool lie_in(AnswerKind kind, Body& body, std::mt19937_64& rng) {
  switch (kind) {
    case AnswerKind::BadProof:
    case AnswerKind::Equivocate:
      if (auto* a = std::get_if<Children>(&body)) return a->left = flipped(a->left), true;
      return false;
    case AnswerKind::ZeroHashes:
      if (auto* a = std::get_if<Children>(&body)) return a->left = a->right = Digest{}, true;
      if (auto* c = std::get_if<IntervalCommit>(&body)) {
        c->root = c->start_value = Digest{};
        for (auto* p : {&c->start_in_level1, &c->first, &c->last})
          for (auto& d : p->path) d = Digest{};
        return true;
      }
      return false;
    case AnswerKind::AlwaysDisagree:
      if (auto* a = std::get_if<Children>(&body))
        return a->left = random_digest(rng), a->right = random_digest(rng), true;
      return false;
    case AnswerKind::BadHandoff:
      if (auto* c = std::get_if<IntervalCommit>(&body)) return c->start_value = flipped(c->start_value), true;
      if (auto* c = std::get_if<StepCommit>(&body)) return c->pre_root = flipped(c->pre_root), true;
      return false;
    case AnswerKind::ForgedBytes:
      if (auto* t = std::get_if<TensorChunk>(&body)) return !t->bytes.empty() && (t->bytes[0] ^= 0x01, true);
      return false;
    case AnswerKind::NanBytes:
      if (auto* t = std::get_if<TensorChunk>(&body)) {
        // Quiet NaN, +inf, −inf, signalling NaN, repeated: what a broken accelerator might emit.
        static constexpr uint32_t kPattern[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x7F800001u};
        for (size_t i = 0; i + 4 <= t->bytes.size(); i += 4)
          std::memcpy(&t->bytes[i], &kPattern[(i / 4) % 4], 4);
        return !t->bytes.empty();
      }
      return false;
    case AnswerKind::BadRecord:
      if (auto* r = std::get_if<Records>(&body))
        for (auto& rec : r->records)
          if (!rec.inputs.empty()) return rec.inputs[0] = flipped(rec.inputs[0]), true;
      return false;
    default:
      return false;
  }
}

// One malformed frame in place of (or before) the answer `own`.
std::vector<uint8_t> malformed(AnswerKind kind, const Envelope& own, const KeyPair& key, BehaviourState& st) {
  // Sequence just below the real answer's: above every earlier answer, so the frame reaches the
  // checks it is meant for, and the real answer that follows it is still fresh.
  const uint64_t seq = own.sequence > 1 ? own.sequence - 1 : own.sequence;
  switch (kind) {
    case AnswerKind::Truncated:
      return {own.bytes.begin(), own.bytes.begin() + static_cast<std::ptrdiff_t>(own.bytes.size() / 2)};
    case AnswerKind::Oversized: {
      std::vector<uint8_t> big(kMaxMessageBytes + 1);
      for (auto& b : big) b = static_cast<uint8_t>(st.rng());
      return big;
    }
    case AnswerKind::BadSignature: {
      std::vector<uint8_t> bytes = seal(key, own.context, seq, own.body);
      bytes.back() ^= 0x01;
      return bytes;
    }
    case AnswerKind::ForeignKey:
      return seal(generate_keypair(), own.context, seq, own.body);
    case AnswerKind::ReplayRound:
      return st.last_answer.empty() ? seal(key, own.context, 1, own.body) : st.last_answer;
    case AnswerKind::ReplayDispute:
      return seal(key, random_digest(st.rng), seq, own.body);
    case AnswerKind::WrongRound: {
      Body body = own.body;
      set_round(body, round_of(body) + 1000);
      return seal(key, own.context, seq, body);
    }
    default:
      return own.bytes;
  }
}

std::vector<std::vector<uint8_t>> mirror_answers(const BehaviourSetup& setup, BehaviourState& st,
                                                 const nodes::QueryContext& q,
                                                 const std::vector<Envelope>& own) {
  auto& m = st.mirrors[q.open.context];
  if (!m) {
    m = std::make_shared<BehaviourState::Mirror>();
    const DisputeOpen& d = std::get<DisputeOpen>(q.open.body);
    JobSpec job = parse_job(d.job_toml, "disputed job");
    locate_data(job, setup.registry);
    m->pool = std::make_unique<ThreadPool>(setup.threads);
    m->data = nodes::shared_train_set(job, *m->pool);
    const Digest id = job_id(job, *m->data);
    m->session = std::make_unique<ProviderDisputeSession>(setup.key, q.open, job, *m->data,
                                                          setup.mirror_store / to_hex(id), *m->pool,
                                                          std::vector<PublicKey>{q.query.sender});
  }
  // Signed with our own sequence numbers, so they are fresh exactly where our own answers would be.
  std::vector<std::vector<uint8_t>> out;
  const uint64_t first = own.empty() ? 1 : own.front().sequence;
  uint64_t i = 0;
  for (auto& bytes : m->session->on_envelope(q.query))
    out.push_back(seal(setup.key, q.open.context, first + i++, open_envelope(bytes).body));
  return out;
}

}  // namespace

nodes::ReplyFilter make_reply_filter(BehaviourSetup setup, std::shared_ptr<BehaviourState> state) {
  return [setup, state](const nodes::QueryContext& q, std::vector<std::vector<uint8_t>> frames) {
    std::lock_guard lock(state->mu);
    BehaviourState& st = *state;
    const AnswerBehaviour& b = setup.answers;
    const Query& query = std::get<Query>(q.query.body);
    const uint32_t round = query.round;
    const bool active = round >= b.round;
    std::vector<Envelope> own;
    for (auto& f : frames) own.push_back(open_envelope(f));
    nodes::ProviderReply reply;
    reply.frames = frames;

    if (is_lie_kind(b.kind) && active && st.counts.acts == 0) {
      for (size_t i = 0; i < own.size(); ++i) {
        Body body = own[i].body;
        if (!lie_in(b.kind, body, st.rng)) continue;
        std::vector<uint8_t> lie = seal(setup.key, own[i].context, own[i].sequence, body);
        ++st.counts.acts;
        ++st.counts.frames_injected;
        if (b.kind == AnswerKind::Equivocate)
          // Both answers, signed: the honest-looking one first, then the other one for the same round.
          reply.frames.push_back(seal(setup.key, own[i].context, own.back().sequence + 1, body));
        else
          reply.frames[i] = std::move(lie);
        break;
      }
    } else if (b.kind == AnswerKind::AlwaysDisagree) {
      bool changed = false;
      for (size_t i = 0; i < own.size(); ++i) {
        Body body = own[i].body;
        if (!lie_in(b.kind, body, st.rng)) continue;
        reply.frames[i] = seal(setup.key, own[i].context, own[i].sequence, body);
        ++st.counts.frames_injected;
        changed = true;
      }
      if (changed) ++st.counts.acts;
    } else if (b.kind == AnswerKind::AlwaysAgree || (b.kind == AnswerKind::ChangeRoot && active) ||
               (b.kind == AnswerKind::AgreeThenDisagree && !active)) {
      reply.frames = mirror_answers(setup, st, q, own);
      ++st.counts.acts;
      st.counts.frames_injected += static_cast<uint32_t>(reply.frames.size());
      st.counts.frames_withheld += static_cast<uint32_t>(frames.size());
    } else if (b.kind == AnswerKind::Silent && active) {
      reply.frames.clear();
      ++st.counts.acts;
      st.counts.frames_withheld += static_cast<uint32_t>(frames.size());
    } else if (b.kind == AnswerKind::Late && active) {
      reply.delay = query.clock + std::chrono::milliseconds(500);
      ++st.counts.acts;
    } else if (b.kind == AnswerKind::LastMoment) {
      // Just inside its clock; the referee's clock started a little before ours.
      reply.delay = std::max(query.clock - std::chrono::milliseconds(400), std::chrono::milliseconds{0});
      ++st.counts.acts;
    } else if (b.kind == AnswerKind::WithholdOpenings && query.kind == QueryKind::OpenInputs) {
      // Leaves the other party to stream the inputs alone, against its clock.
      reply.frames.clear();
      ++st.counts.acts;
      st.counts.frames_withheld += static_cast<uint32_t>(frames.size());
    } else if (b.kind == AnswerKind::Disconnect && active && st.counts.acts == 0) {
      reply.frames.clear();
      reply.disconnect = true;
      ++st.counts.acts;
      ++st.counts.disconnects;
      st.counts.frames_withheld += static_cast<uint32_t>(frames.size());
    } else if (b.kind == AnswerKind::CrashRestart && active && st.counts.acts == 0) {
      reply.frames.clear();
      setup.crash(b.down);
      ++st.counts.acts;
      ++st.counts.disconnects;
      st.counts.frames_withheld += static_cast<uint32_t>(frames.size());
    } else if (is_malformed_kind(b.kind) && active && !own.empty() && st.counts.acts < b.count) {
      std::vector<uint8_t> bad = malformed(b.kind, own.front(), setup.key, st);
      if (b.instead) {
        st.counts.frames_withheld += static_cast<uint32_t>(frames.size());
        reply.frames.clear();
      }
      reply.frames.insert(reply.frames.begin(), std::move(bad));
      ++st.counts.acts;
      ++st.counts.frames_injected;
    }
    if (!frames.empty()) st.last_answer = frames.front();

    // A slower machine: the answer leaves as late as computing it there would have made it.
    if (setup.slowdown > 1 && !reply.frames.empty()) {
      reply.delay += std::chrono::duration_cast<std::chrono::milliseconds>(q.compute * (setup.slowdown - 1));
      ++st.counts.slowed;
    }
    // The link: added latency on every reply, its bandwidth; a dropped reply takes the connection with it.
    reply.delay += setup.link.latency;
    reply.bytes_per_second = setup.link.bytes_per_second;
    if (setup.link.latency > std::chrono::milliseconds{0} ||
        (setup.link.bytes_per_second != 0 && !reply.frames.empty()))
      ++st.counts.link_delayed;
    if (setup.link.drop_rate > 0 &&
        std::uniform_real_distribution<double>(0, 1)(st.rng) < setup.link.drop_rate) {
      reply.frames.clear();
      reply.disconnect = true;
      ++st.counts.link_dropped;
      ++st.counts.disconnects;
    }
    return reply;
  };
}

}  // namespace tribunal::scenarios
