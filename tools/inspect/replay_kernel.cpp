// replay: one kernel re-run with its CPU reference, its outputs judged by the pre-check (tools/replay/precheck.h),
// and its rows of msprobe's accuracy_checking_result / _details CSVs.
#include <algorithm>
#include <cmath>
#include <optional>

#include "format/format.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/replay.h"
#include "tools/reader/csv.h"
#include "tools/reader/metrics.h"

namespace msprobe::tools::replay {

const std::vector<std::string> kResultColumns = {
    "API name", "Forward Test Success", "Backward Test Success", "Message", "Step", "Rank", "Launch Index"};
const std::vector<std::string> kDetailColumns = {"API Name",
                                                 "Bench Dtype",
                                                 "DEVICE Dtype",
                                                 "Shape",
                                                 "余弦相似度",
                                                 "最大绝对误差",
                                                 "双百指标",
                                                 "双千指标",
                                                 "双万指标",
                                                 "二进制一致错误率",
                                                 "误差均衡性",
                                                 "均方根误差",
                                                 "小值域错误占比",
                                                 "相对误差最大值",
                                                 "相对误差平均值",
                                                 "inf/nan错误率",
                                                 "相对误差错误率",
                                                 "绝对误差错误率",
                                                 "ULP误差最大值",
                                                 "ULP误差平均值",
                                                 "ULP误差大于阈值占比",
                                                 "Status",
                                                 "Message",
                                                 "Step",
                                                 "Rank"};

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

namespace {

// A kernel's dumped tensors: inputs by slot; outputs in `output` order, the members of a tensor list output (an
// aclTensorList out, "output.0.1") in place of the list.
struct KernelTensors {
  std::vector<TensorInfo> all;
  std::unordered_map<std::string, const TensorInfo *> inputs;  // into `all`
  std::vector<const TensorInfo *> outputs;                     // null where output i is not a tensor
  std::vector<std::string> output_slots;                       // "0", "1", or "0.1" for a list member
};

const Json *array_member(const Json &entry, std::string_view key) {
  auto it = entry.find(std::string(key));
  return it != entry.end() && it->is_array() ? &*it : nullptr;
}

KernelTensors kernel_tensors(const Folder &f, const EntryRead &k) {
  KernelTensors kt;
  kt.all = entry_tensors(k.entry, f.header);
  for (const TensorInfo &t : kt.all)
    if (t.io == format::IoKind::Input) kt.inputs.emplace(t.slot, &t);
  if (const Json *out_json = array_member(k.entry, format::json_key::kOutput))
    for (size_t i = 0; i < out_json->size(); ++i) {
      const Json &o = (*out_json)[i];
      if (!o.is_array() || o.empty()) {
        kt.output_slots.push_back(std::to_string(i));
        continue;
      }
      for (size_t m = 0; m < o.size(); ++m) kt.output_slots.push_back(std::to_string(i) + "." + std::to_string(m));
    }
  kt.outputs.assign(kt.output_slots.size(), nullptr);
  for (const TensorInfo &t : kt.all)
    if (t.io == format::IoKind::Output)
      for (size_t i = 0; i < kt.outputs.size(); ++i)
        if (t.slot == kt.output_slots[i]) kt.outputs[i] = &t;
  return kt;
}

OutputRow output_row(const TensorInfo &t) {
  OutputRow row;
  row.slot = t.slot;
  row.device_dtype = t.dtype_text;
  row.shape = shape_text(t.shape);
  row.bench_dtype = "N/A";
  return row;
}

// Every dumped output listed with the reason none was compared.
KernelResult skipped(const KernelTensors &kt, const std::string &why) {
  KernelResult r;
  r.status = Status::Skip;
  r.message = one_line(why);
  for (size_t i = 0; i < kt.outputs.size(); ++i) {
    if (!kt.outputs[i]) continue;
    OutputRow row = output_row(*kt.outputs[i]);
    row.m.message = r.message;
    r.rows.push_back(std::move(row));
  }
  return r;
}

// The reference's outputs for the kernel's recorded arguments. Throws (RefError or another std::exception) when it
// cannot run.
Outputs run_reference(const RefEntry &ref, const Folder &f, const EntryRead &k, const KernelTensors &kt,
                      const Context &ctx) {
  std::vector<std::unique_ptr<Tensor>> store;
  Call call;
  call.op = ref.op_type;
  if (const Json *in_json = array_member(k.entry, format::json_key::kInputArgs))
    for (size_t i = 0; i < in_json->size(); ++i)
      call.args.push_back(make_arg(f, (*in_json)[i], std::to_string(i), kt.inputs, store));
  for (const TensorInfo *t : kt.outputs) {
    OutSpec s;
    if (t) {
      s.present = true;
      s.shape = t->shape;
      s.dtype = t->dtype;
    }
    call.outputs.push_back(std::move(s));
  }
  if (ref.collective && ctx.members) call.members = ctx.members(f, k);
  return ref.fn(call);
}

// Keeps only the elements the kernel writes (Tensor::written) in both; returns how many were left out.
size_t judged_elements(Tensor &bench, Tensor &device) {
  if (bench.written.empty()) return 0;
  size_t kept = 0;
  for (size_t i = 0; i < bench.v.size(); ++i)
    if (bench.written[i]) bench.v[kept] = bench.v[i], device.v[kept] = device.v[i], ++kept;
  const size_t left_out = bench.v.size() - kept;
  bench.v.resize(kept);
  device.v.resize(kept);
  return left_out;
}

void note_unwritten(std::string &message, size_t n) {
  message += (message.empty() ? "" : " ") + std::to_string(n) + " element(s) the kernel does not write not judged.";
}

// Output `t` of the kernel against the reference's value for it; *compared says whether it could be judged.
OutputRow judge_output(const Folder &f, const TensorInfo &t, std::optional<Tensor> &want, const RefEntry &ref,
                       const PrecheckThresholds &th, bool *compared) {
  OutputRow row = output_row(t);
  *compared = false;
  if (!want) {
    row.m.message = "The reference computes nothing for this output.";
    return row;
  }
  Tensor bench = std::move(*want);
  try {
    Tensor device = load_tensor(f, t);
    const format::DType dt = *t.dtype;
    // The benchmark: float64, or the value a correct kernel stores where the output dtype is coarser than the
    // reference's error (half types, integers, bool) or the op is a conversion (Cast).
    const bool round = ref.round_to_output || !(dt == format::DType::F32 || dt == format::DType::F64);
    double eps = relative_zero_eps(format::DType::F64);
    row.bench_dtype = "Float64";
    if (round) {
      for (double &x : bench.v) x = replay::round_to_dtype(x, dt);  // not collector's (found by ADL)
      eps = relative_zero_eps(dt);
      row.bench_dtype = t.dtype_text;
    }
    if (bench.size() != device.size()) {
      row.status = Status::Error;
      row.m.message =
          "The shape of bench" + shape_text(bench.shape) + " and npu" + shape_text(device.shape) + " not equal.";
    } else {
      const size_t unwritten = judged_elements(bench, device);
      row.status = precheck(device.v, bench.v, dt, eps, th, row.m);
      if (unwritten) note_unwritten(row.m.message, unwritten);
    }
    *compared = true;
  } catch (const RefError &e) {
    row.m.message = std::string("Output not compared: ") + e.what();
  }
  return row;
}

// The kernel's message: the outputs not compared, and first the failing ones when it fails.
void write_message(KernelResult &r, bool any_compared) {
  if (!any_compared) {
    r.status = Status::Skip;
    r.message = "No output could be compared.";
  } else {
    std::string skipped;
    for (const OutputRow &row : r.rows)
      if (row.status == Status::Skip) skipped += (skipped.empty() ? "" : ", ") + std::string("output.") + row.slot;
    if (!skipped.empty()) r.message = "Not compared: " + skipped + ".";
  }
  if (r.status == Status::Error || r.status == Status::Warning) {
    std::string bad;
    for (const OutputRow &row : r.rows)
      if (row.status == Status::Error || row.status == Status::Warning)
        bad += (bad.empty() ? "" : ", ") + std::string("output.") + row.slot + " " + status_text(row.status);
    r.message = bad + (r.message.empty() ? "" : ". " + r.message);
  }
}

}  // namespace

KernelResult replay_kernel(const Folder &f, const EntryRead &k, const Context &ctx) {
  const std::string op(op_type_of(k.name));
  const RefEntry *ref = find_reference(op);
  const KernelTensors kt = kernel_tensors(f, k);
  if (!ref) {
    KernelResult r = skipped(kt, "No CPU reference for op type " + op + ".");
    r.no_reference = true;
    return r;
  }
  Outputs want;
  try {
    want = run_reference(*ref, f, k, kt, ctx);
  } catch (const std::exception &e) {
    return skipped(kt, std::string("The reference could not run: ") + e.what());
  }
  want.resize(std::max(want.size(), kt.outputs.size()));  // an output the reference left out computes nothing
  KernelResult r;
  bool any_compared = false;
  for (size_t i = 0; i < kt.outputs.size(); ++i) {
    if (!kt.outputs[i]) continue;
    bool compared = false;
    OutputRow row = judge_output(f, *kt.outputs[i], want[i], *ref, ctx.th, &compared);
    if (compared) r.status = worse(r.status, row.status);  // the worst output decides
    any_compared |= compared;
    r.rows.push_back(std::move(row));
  }
  write_message(r, any_compared);
  return r;
}

NonFiniteCheck check_nonfinite(const Folder &f, const EntryRead &k, const Context &ctx) {
  NonFiniteCheck c;
  const std::string op(op_type_of(k.name));
  const RefEntry *ref = find_reference(op);
  if (!ref) {
    c.reason = "no CPU reference for op type " + op;
    return c;
  }
  const KernelTensors kt = kernel_tensors(f, k);
  Outputs want;
  try {
    want = run_reference(*ref, f, k, kt, ctx);
  } catch (const std::exception &e) {
    c.reason = std::string("the CPU reference could not run: ") + e.what();
    return c;
  }
  uint64_t device_bad = 0, both_bad = 0;
  std::string first_kernel_slot;
  for (size_t i = 0; i < kt.outputs.size() && i < want.size(); ++i) {
    if (!kt.outputs[i] || !want[i] || !kt.outputs[i]->dtype) continue;
    Tensor device;
    try {
      device = load_tensor(f, *kt.outputs[i]);
    } catch (const RefError &e) {
      c.reason = e.what();
      continue;
    }
    if (device.size() != want[i]->size()) continue;
    const format::DType dt = *kt.outputs[i]->dtype;
    for (size_t j = 0; j < device.size(); ++j) {
      if (std::isfinite(device.v[j]) || (!want[i]->written.empty() && !want[i]->written[j])) continue;
      ++device_bad;
      if (!std::isfinite(replay::round_to_dtype(want[i]->v[j], dt)))
        ++both_bad;
      else if (first_kernel_slot.empty())
        first_kernel_slot = "output." + std::to_string(i) + " element " + std::to_string(j) + ": the reference gives " +
                            metric_text(replay::round_to_dtype(want[i]->v[j], dt));
    }
  }
  if (device_bad == 0) {
    if (c.reason.empty()) c.reason = "no non-finite output element could be compared";
    return c;
  }
  if (both_bad < device_bad) {
    c.result = NonFiniteCheck::Result::Kernel;
    c.reason = std::to_string(device_bad - both_bad) + " of " + std::to_string(device_bad) +
               " non-finite output element(s) are finite in the CPU reference (" + first_kernel_slot +
               "): the kernel computed wrongly from finite inputs";
  } else {
    c.result = NonFiniteCheck::Result::Data;
    c.reason = "the CPU reference, rounded to the output's dtype, is non-finite at all " + std::to_string(device_bad) +
               " position(s): the values left the dtype's range (a data or scale problem, not a kernel bug)";
  }
  return c;
}

std::string result_row(const Folder &f, const EntryRead &k, const KernelResult &r) {
  const std::vector<std::string> cells = {k.name,
                                          status_text(r.status),
                                          r.status == Status::Skip ? "SKIP" : " ",
                                          one_line(r.message),
                                          f.step,
                                          f.rank,
                                          k.launch_index ? std::to_string(*k.launch_index) : "N/A"};
  return csv_row(cells);
}

std::string detail_rows(const Folder &f, const EntryRead &k, const KernelResult &r) {
  std::string out;
  for (const OutputRow &row : r.rows) {
    const PrecheckMetrics &m = row.m;
    const std::string na = "N/A";
    const std::vector<std::string> cells = {k.name + ".output." + row.slot,
                                            row.bench_dtype,
                                            row.device_dtype,
                                            row.shape,
                                            metric_text(m.cosine),
                                            metric_text(m.max_abs_err),
                                            metric_text(m.hundredth),
                                            metric_text(m.thousandth),
                                            metric_text(m.ten_thousandth),
                                            metric_text(m.error_rate),
                                            metric_text(m.error_balance),
                                            metric_text(m.rmse),
                                            metric_text(m.small_value_err_ratio),
                                            metric_text(m.max_rel_err),
                                            metric_text(m.mean_rel_err),
                                            na,
                                            na,
                                            na,
                                            na,
                                            na,
                                            na,
                                            status_text(row.status),
                                            one_line(m.message),
                                            f.step,
                                            f.rank};
    out += csv_row(cells);
  }
  return out;
}

}  // namespace msprobe::tools::replay
