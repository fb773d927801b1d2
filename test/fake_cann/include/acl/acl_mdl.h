/* CANN stand-in: acl_mdl.h — the model execution API subset a real .om program uses (load, describe, datasets,
 * execute, unload; CANN 9.x: ge inc/external/acl/acl_mdl.h). The model files are the stand-in's own
 * (test/fake_cann/README.md), not .om. The model dump switches (aclmdlInitDump/SetDump/FinalizeDump) and stream capture
 * (aclmdlRI*) are in acl_rt.h, as in CANN 9.x (CANN 8.x declared the dump switches here). */
#ifndef INC_EXTERNAL_ACL_ACL_MODEL_H_
#define INC_EXTERNAL_ACL_ACL_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAX_DIM_CNT 128
#define ACL_MAX_TENSOR_NAME_LEN 128

#define ACL_MDL_LOAD_FROM_FILE 1
#define ACL_MDL_LOAD_FROM_FILE_WITH_MEM 2
#define ACL_MDL_LOAD_FROM_MEM 3
#define ACL_MDL_LOAD_FROM_MEM_WITH_MEM 4
#define ACL_MDL_LOAD_FROM_FILE_WITH_Q 5
#define ACL_MDL_LOAD_FROM_MEM_WITH_Q 6

#define ACL_ATTR_NAME_DATA_DUMP_ORIGIN_OP_NAMES "_datadump_original_op_names"

typedef struct aclmdlDataset aclmdlDataset;
typedef struct aclmdlDesc aclmdlDesc;
typedef struct aclmdlAIPP aclmdlAIPP;
typedef struct aclmdlConfigHandle aclmdlConfigHandle;
typedef struct aclmdlExecConfigHandle aclmdlExecConfigHandle;

typedef enum {
  ACL_MDL_PRIORITY_INT32 = 0,
  ACL_MDL_LOAD_TYPE_SIZET,
  ACL_MDL_PATH_PTR,
  ACL_MDL_MEM_ADDR_PTR,
  ACL_MDL_MEM_SIZET,
  ACL_MDL_WEIGHT_ADDR_PTR,
  ACL_MDL_WEIGHT_SIZET,
  ACL_MDL_WORKSPACE_ADDR_PTR,
  ACL_MDL_WORKSPACE_SIZET,
  ACL_MDL_INPUTQ_NUM_SIZET,
  ACL_MDL_INPUTQ_ADDR_PTR,
  ACL_MDL_OUTPUTQ_NUM_SIZET,
  ACL_MDL_OUTPUTQ_ADDR_PTR,
  ACL_MDL_WORKSPACE_MEM_OPTIMIZE,
  ACL_MDL_WEIGHT_PATH_PTR,
  ACL_MDL_MODEL_DESC_PTR,
  ACL_MDL_MODEL_DESC_SIZET,
  ACL_MDL_KERNEL_PTR,
  ACL_MDL_KERNEL_SIZET,
  ACL_MDL_KERNEL_ARGS_PTR,
  ACL_MDL_KERNEL_ARGS_SIZET,
  ACL_MDL_STATIC_TASK_PTR,
  ACL_MDL_STATIC_TASK_SIZET,
  ACL_MDL_DYNAMIC_TASK_PTR,
  ACL_MDL_DYNAMIC_TASK_SIZET,
  ACL_MDL_MEM_MALLOC_POLICY_SIZET,
  ACL_MDL_FIFO_PTR,
  ACL_MDL_FIFO_SIZET,
  ACL_MDL_WITHOUT_GRAPH_INT32,
  ACL_NPU_PERF_MODE,
  ACL_MDL_RESERVED = 0xFFFF
} aclmdlConfigAttr;

typedef enum {
  ACL_MDL_STREAM_SYNC_TIMEOUT = 0,
  ACL_MDL_EVENT_SYNC_TIMEOUT,
  ACL_MDL_WORK_ADDR_PTR,
  ACL_MDL_WORK_SIZET,
  ACL_MDL_MPAIMID_SIZET,
  ACL_MDL_AICQOS_SIZET,
  ACL_MDL_AICOST_SIZET,
  ACL_MDL_MEC_TIMETHR_SIZET,
  ACL_MDL_EXEC_PRIORITY_INT32,
  ACL_MDL_NPU_PERF_MODE
} aclmdlExecConfigAttr;

typedef struct aclmdlIODims {
  char name[ACL_MAX_TENSOR_NAME_LEN]; /* tensor name */
  size_t dimCount;                    /* dim array count */
  int64_t dims[ACL_MAX_DIM_CNT];      /* dim data array */
} aclmdlIODims;

ACL_FUNC_VISIBILITY aclmdlDesc *aclmdlCreateDesc(void);
ACL_FUNC_VISIBILITY aclError aclmdlDestroyDesc(aclmdlDesc *modelDesc);
ACL_FUNC_VISIBILITY aclError aclmdlGetDesc(aclmdlDesc *modelDesc, uint32_t modelId);
ACL_FUNC_VISIBILITY aclError aclmdlGetDescFromFile(aclmdlDesc *modelDesc, const char *modelPath);
ACL_FUNC_VISIBILITY aclError aclmdlGetDescFromMem(aclmdlDesc *modelDesc, const void *model, size_t modelSize);
ACL_FUNC_VISIBILITY size_t aclmdlGetNumInputs(aclmdlDesc *modelDesc);
ACL_FUNC_VISIBILITY size_t aclmdlGetNumOutputs(aclmdlDesc *modelDesc);
ACL_FUNC_VISIBILITY size_t aclmdlGetInputSizeByIndex(aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY size_t aclmdlGetOutputSizeByIndex(aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY const char *aclmdlGetInputNameByIndex(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY const char *aclmdlGetOutputNameByIndex(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclFormat aclmdlGetInputFormat(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclFormat aclmdlGetOutputFormat(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclDataType aclmdlGetInputDataType(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclDataType aclmdlGetOutputDataType(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclError aclmdlGetInputDims(const aclmdlDesc *modelDesc, size_t index, aclmdlIODims *dims);
ACL_FUNC_VISIBILITY aclError aclmdlGetOutputDims(const aclmdlDesc *modelDesc, size_t index, aclmdlIODims *dims);

ACL_FUNC_VISIBILITY aclmdlDataset *aclmdlCreateDataset(void);
ACL_FUNC_VISIBILITY aclError aclmdlDestroyDataset(const aclmdlDataset *dataset);
ACL_FUNC_VISIBILITY aclError aclmdlAddDatasetBuffer(aclmdlDataset *dataset, aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY size_t aclmdlGetDatasetNumBuffers(const aclmdlDataset *dataset);
ACL_FUNC_VISIBILITY aclDataBuffer *aclmdlGetDatasetBuffer(const aclmdlDataset *dataset, size_t index);

ACL_FUNC_VISIBILITY aclError aclmdlLoadFromFile(const char *modelPath, uint32_t *modelId);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromMem(const void *model, size_t modelSize, uint32_t *modelId);
ACL_FUNC_VISIBILITY aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output);
ACL_FUNC_VISIBILITY aclError aclmdlExecuteAsync(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                                                aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclmdlUnload(uint32_t modelId);

/* Load and execution variants (ge api/acl/acl_model/model/model.cpp): the model in the caller's device memory of at
 * least aclmdlQuerySize's sizes; the queue variants are refused (no data queues: ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID);
 * aclmdlExecuteV2 runs on `stream` (NULL: the model's own) and waits for it. */
ACL_FUNC_VISIBILITY aclError aclmdlQuerySize(const char *fileName, size_t *workSize, size_t *weightSize);
ACL_FUNC_VISIBILITY aclError aclmdlQuerySizeFromMem(const void *model, size_t modelSize, size_t *workSize,
                                                    size_t *weightSize);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromFileWithMem(const char *modelPath, uint32_t *modelId, void *workPtr,
                                                       size_t workSize, void *weightPtr, size_t weightSize);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromMemWithMem(const void *model, size_t modelSize, uint32_t *modelId,
                                                      void *workPtr, size_t workSize, void *weightPtr,
                                                      size_t weightSize);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromFileWithQ(const char *modelPath, uint32_t *modelId, const uint32_t *inputQ,
                                                     size_t inputQNum, const uint32_t *outputQ, size_t outputQNum);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromMemWithQ(const void *model, size_t modelSize, uint32_t *modelId,
                                                    const uint32_t *inputQ, size_t inputQNum, const uint32_t *outputQ,
                                                    size_t outputQNum);
ACL_FUNC_VISIBILITY aclError aclmdlLoadWithConfig(const aclmdlConfigHandle *handle, uint32_t *modelId);
ACL_FUNC_VISIBILITY aclmdlConfigHandle *aclmdlCreateConfigHandle(void);
ACL_FUNC_VISIBILITY aclError aclmdlDestroyConfigHandle(aclmdlConfigHandle *handle);
ACL_FUNC_VISIBILITY aclError aclmdlSetConfigOpt(aclmdlConfigHandle *handle, aclmdlConfigAttr attr,
                                                const void *attrValue, size_t valueSize);
ACL_FUNC_VISIBILITY aclmdlExecConfigHandle *aclmdlCreateExecConfigHandle(void);
ACL_FUNC_VISIBILITY aclError aclmdlDestroyExecConfigHandle(const aclmdlExecConfigHandle *handle);
ACL_FUNC_VISIBILITY aclError aclmdlSetExecConfigOpt(aclmdlExecConfigHandle *handle, aclmdlExecConfigAttr attr,
                                                    const void *attrValue, size_t valueSize);
ACL_FUNC_VISIBILITY aclError aclmdlExecuteV2(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                                             aclrtStream stream, const aclmdlExecConfigHandle *handle);
ACL_FUNC_VISIBILITY aclError aclmdlExecuteAsyncV2(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                                                  aclrtStream stream, const aclmdlExecConfigHandle *handle);

#ifdef __cplusplus
}
#endif

#endif /* INC_EXTERNAL_ACL_ACL_MODEL_H_ */
