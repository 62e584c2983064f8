/* softndk kernel layer — SAL annotations as no-ops (issue 9 §2). GCC and Clang do not analyse them; every
 * annotation a WDK driver commonly writes expands to nothing, the parameterised ones swallow their arguments.
 * The old double-underscore forms (__in, __out, …) are defined for C only: libstdc++ uses those names. */
#ifndef SOFTNDK_KM_SAL_H
#define SOFTNDK_KM_SAL_H

#define _In_
#define _In_opt_
#define _In_z_
#define _In_opt_z_
#define _Out_
#define _Out_opt_
#define _Inout_
#define _Inout_opt_
#define _Inout_z_
#define _Outptr_
#define _Outptr_opt_
#define _Outptr_result_maybenull_
#define _Outptr_opt_result_maybenull_
#define _Outptr_result_nullonfailure_
#define _Reserved_
#define _Must_inspect_result_
#define _Check_return_
#define _Use_decl_annotations_
#define _Ret_maybenull_
#define _Ret_notnull_
#define _Null_terminated_
#define _NullNull_terminated_
#define _Printf_format_string_
#define _Interlocked_operand_
#define _Pre_notnull_
#define _Pre_maybenull_
#define _Pre_valid_
#define _Post_invalid_
#define _Post_ptr_invalid_
#define _Post_maybenull_
#define _Post_notnull_
#define _Frees_ptr_
#define _Frees_ptr_opt_
#define _Literal_
#define _Notliteral_
#define _Strict_type_match_
#define _IRQL_saves_
#define _IRQL_restores_
#define _IRQL_uses_cancel_
#define _IRQL_is_cancel_
#define _IRQL_requires_same_
#define _IRQL_always_function_min_(irql)
#define _IRQL_always_function_max_(irql)
#define _Kernel_float_saved_
#define _Kernel_float_restored_
#define _Kernel_float_used_
#define _Kernel_clear_do_init_(yesNo)
#define _Kernel_requires_resource_held_(kind)
#define _Kernel_requires_resource_not_held_(kind)
#define _Kernel_acquires_resource_(kind)
#define _Kernel_releases_resource_(kind)

#define _In_reads_(size)
#define _In_reads_opt_(size)
#define _In_reads_bytes_(size)
#define _In_reads_bytes_opt_(size)
#define _In_reads_z_(size)
#define _In_range_(low, high)
#define _Out_range_(low, high)
#define _Ret_range_(low, high)
#define _Deref_out_range_(low, high)
#define _Out_writes_(size)
#define _Out_writes_opt_(size)
#define _Out_writes_z_(size)
#define _Out_writes_bytes_(size)
#define _Out_writes_bytes_opt_(size)
#define _Out_writes_all_(size)
#define _Out_writes_bytes_all_(size)
#define _Out_writes_to_(size, count)
#define _Out_writes_to_opt_(size, count)
#define _Out_writes_bytes_to_(size, count)
#define _Out_writes_bytes_to_opt_(size, count)
#define _Inout_updates_(size)
#define _Inout_updates_opt_(size)
#define _Inout_updates_bytes_(size)
#define _Inout_updates_bytes_opt_(size)
#define _Field_size_(size)
#define _Field_size_opt_(size)
#define _Field_size_bytes_(size)
#define _Field_size_bytes_opt_(size)
#define _Field_size_part_(size, count)
#define _Field_range_(low, high)
#define _Struct_size_bytes_(size)
#define _Post_writable_byte_size_(size)
#define _Post_satisfies_(cond)
#define _Pre_satisfies_(cond)
#define _Ret_writes_bytes_maybenull_(size)
#define _Outptr_result_bytebuffer_(size)
#define _Outptr_result_buffer_(size)
#define _Success_(expr)
#define _Return_type_success_(expr)
#define _When_(expr, annotes)
#define _At_(target, annotes)
#define _At_buffer_(target, iter, bound, annotes)
#define _Function_class_(name)
#define _Dispatch_type_(type)
#define _Analysis_assume_(expr)
#define _Analysis_assume_lock_held_(lock)
#define _Guarded_by_(lock)
#define _Write_guarded_by_(lock)
#define _Points_to_data_
#define _Requires_lock_held_(lock)
#define _Requires_lock_not_held_(lock)
#define _Requires_exclusive_lock_held_(lock)
#define _Requires_shared_lock_held_(lock)
#define _Acquires_lock_(lock)
#define _Releases_lock_(lock)
#define _Acquires_exclusive_lock_(lock)
#define _Releases_exclusive_lock_(lock)
#define _Acquires_shared_lock_(lock)
#define _Releases_shared_lock_(lock)
#define _Create_lock_level_(level)
#define _Lock_level_order_(a, b)
#define _IRQL_requires_(irql)
#define _IRQL_requires_max_(irql)
#define _IRQL_requires_min_(irql)
#define _IRQL_raises_(irql)
#define _IRQL_saves_global_(kind, param)
#define _IRQL_restores_global_(kind, param)
#define _When_(expr, annotes)
#define _Unreferenced_parameter_
#define _Maybe_raises_SEH_exception_
#define _Raises_SEH_exception_
#define _Ret_z_
#define _Pre_defensive_
#define _Post_defensive_

#ifndef __cplusplus
#define __in
#define __out
#define __inout
#define __in_opt
#define __out_opt
#define __inout_opt
#define __in_bcount(size)
#define __out_bcount(size)
#define __in_ecount(size)
#define __out_ecount(size)
#define __deref_out
#define __checkReturn
#endif

/* driverspecs.h annotations */
#define __drv_aliasesMem
#define __drv_allocatesMem(kind)
#define __drv_freesMem(kind)
#define __drv_maxIRQL(irql)
#define __drv_minIRQL(irql)
#define __drv_requiresIRQL(irql)
#define __drv_savesIRQL
#define __drv_restoresIRQL
#define __drv_dispatchType(type)
#define __drv_when(cond, annotes)
#define __drv_strictTypeMatch(mode)
#define __drv_functionClass(name)

#endif /* SOFTNDK_KM_SAL_H */
