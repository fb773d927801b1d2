// ACL runtime: labels (acl label.cpp over runtime api_c_model.cc rtsLabel*; the runtime's side is model_build.cpp).
// A label list is device memory holding the labels (rtsLabelSwitchListCreate; aclrtDestroyLabelList is rtsFree of it):
// 1 to 65535 of them. Null arguments are the ACL's refusal (ACL_ERROR_INVALID_PARAM), the rest the runtime's.
#include <cstring>
#include <string>

#include "acl/acl.h"
#include "fakecann/device.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"

using namespace fakecann;

extern "C" {

aclError aclrtCreateLabel(aclrtLabel *label) {
  if (label == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  *label = label_create();
  return ACL_SUCCESS;
}

aclError aclrtDestroyLabel(aclrtLabel label) {
  if (label == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (!label_destroy(static_cast<Label *>(label))) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  return ACL_SUCCESS;
}

aclError aclrtSetLabel(aclrtLabel label, aclrtStream stream) {
  if (label == nullptr || stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return label_set(static_cast<Label *>(label), s);
}

aclError aclrtCreateLabelList(aclrtLabel *labels, size_t num, aclrtLabelList *labelList) {
  if (labels == nullptr || labelList == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (num == 0 || num > 65535) {
    set_error_message("aclrtCreateLabelList: num must be in (0, 65535]");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  for (size_t i = 0; i < num; ++i)
    if (!label_live(static_cast<Label *>(labels[i]))) {
      set_error_message("aclrtCreateLabelList: label " + std::to_string(i) + " is not a live label");
      return rt_error(ACL_ERROR_RT_PARAM_INVALID);
    }
  void *list = device_alloc(8 * num);
  if (list == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
  std::memcpy(device_bytes(list, 8 * num), labels, 8 * num);
  *labelList = list;
  return ACL_SUCCESS;
}

aclError aclrtDestroyLabelList(aclrtLabelList labelList) {
  if (labelList == nullptr) return ACL_ERROR_INVALID_PARAM;
  return device_free(labelList) ? ACL_SUCCESS : rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

aclError aclrtSwitchLabelByIndex(void *ptr, uint32_t maxValue, aclrtLabelList labelList, aclrtStream stream) {
  if (ptr == nullptr || labelList == nullptr || stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return label_switch_by_index(ptr, maxValue, labelList, s);
}

}  // extern "C"
