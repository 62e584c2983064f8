/* smbdirect-client: an SMB Direct client written as a Windows kernel driver is. It opens NDK through
 * WskOpenNdkAdapter, speaks MS-SMBD (transport.c: negotiate, credits, fragmentation and reassembly, keepalive) and
 * SMB2 over it (smb2.c: negotiate, session setup, tree connect, create, READ and WRITE with RDMA channels over
 * fast-registered buffers, close, logoff; ntlm.c: NTLMv2 and SMB3 signing for a user session), and checks what it
 * writes by reading it back (client.c). driver.c has the parameters, DriverEntry and DriverUnload. */
#pragma once

#include <ntddk.h>
#include <wdmsec.h>
#include <ndis.h>
#include <netioapi.h>
#include <ip2string.h>
#include <wsk.h>
#include <wskndk.h>
#include <ntstrsafe.h>

#include "smb_wire.h"

#define SC_TAG 'dbmS'               /* "Smbd" in a pool dump */
#define SC_RECEIVES 32              /* receives posted, and so the most credits the server holds */
#define SC_RECEIVE_SIZE 8192        /* our MaxReceiveSize */
#define SC_PREFERRED_SEND_SIZE 1364 /* what Windows offers; the send size is the smaller of it and the server's */
#define SC_SENDS 8                  /* send slots; one message in flight per slot */
/* our MaxFragmentedSize, the reassembly buffer: 1 MiB as Windows offers; ksmbd refuses 128 KiB and less, though
 * [MS-SMBD] §3.1.5.2 names 131072 as the least a peer may offer */
#define SC_MAX_FRAGMENTED (1024 * 1024)
#define SC_CREDITS_WANTED 255       /* send credits asked of the server */
#define SC_MAX_IO (8 * 1024 * 1024) /* the largest READ or WRITE, and the data buffer */
#define SC_MAX_MRS 16               /* fast-register MRs for one I/O: the adapter's FRMRPageCount bounds each */
#define SC_WAIT_MS 20000            /* the longest wait for the server */
#define SC_MAX_INLINE (64 * 1024)   /* the largest READ or WRITE with its data in the messages (fragmented) */
#define SC_SMB2_CREDITS_WANTED 256  /* SMB2 credits asked for in each request */

typedef struct _SC_WAIT {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER* Object;
} SC_WAIT, *PSC_WAIT;

/* A registered buffer: non-paged pool, its MDL and a LAM on the adapter. */
typedef struct _SC_BUFFER {
    PUCHAR Base;
    SIZE_T Length;
    PMDL Mdl;
    PNDK_LOGICAL_ADDRESS_MAPPING Lam;
    ULONG Fbo;
} SC_BUFFER;

/* One fast-register MR of the I/O buffer, and where it stands. */
typedef struct _SC_MR {
    NDK_MR* Mr;
    UINT32 Token;
    BOOLEAN Registered; /* valid until a local invalidate completes or the server's Send with Invalidate names it */
} SC_MR;

typedef struct _SC_DRIVER {
    PDEVICE_OBJECT Device;
    WSK_REGISTRATION WskRegistration;
    WSK_CLIENT_DISPATCH WskClientDispatch;
    WSK_CLIENT_NPI WskClient;
    WSK_PROVIDER_NPI WskProvider;
    BOOLEAN WskCaptured;
    WSK_PROVIDER_NDK_DISPATCH Ndk;
    NDK_ADAPTER* Adapter;
    NDK_PD* Pd;
    NET_IFINDEX IfIndex;
    ULONG FrPages; /* the adapter's FRMRPageCount */
    /* parameters */
    IN_ADDR Address, LocalAddress;
    USHORT Port;
    WCHAR Share[64];
    CHAR User[64]; /* empty: a guest session */
    CHAR Password[64];
    ULONG Files;                   /* files written and read back */
    ULONG LargestIo;               /* the largest READ or WRITE of the size sweep */
    ULONG Benchmark, BenchSeconds; /* Benchmark=1: timed READ and WRITE loops instead of the checked files */
    BOOLEAN LocalInvalidateOnly, RemoteInvalidateOnly;
    /* the connection */
    NDK_CQ* Cq;
    NDK_QP* Qp;
    NDK_CONNECTOR* Connector;
    BOOLEAN Connected;
    KEVENT CqEvent;
    KEVENT Disconnected;
    UINT32 PrivilegedToken;
    SC_BUFFER Receives; /* SC_RECEIVES slots of SC_RECEIVE_SIZE */
    SC_BUFFER Sends;    /* SC_SENDS slots of SC_RECEIVE_SIZE (a send is at most the server's receive size) */
    BOOLEAN SendBusy[SC_SENDS];
    SC_BUFFER Data; /* the I/O buffer */
    SC_MR Mrs[SC_MAX_MRS];
    ULONG MrCount;
    /* MS-SMBD */
    ULONG SendCredits;        /* messages the server can still take */
    ULONG CreditsToGrant;     /* receives posted since the server was last told */
    ULONG ServerWantsCredits; /* its CreditsRequested */
    BOOLEAN AnswerRequested;  /* a message of the server's asked for an answer */
    ULONG MaxSendSize;        /* the smaller of our preferred send size and the server's MaxReceiveSize */
    ULONG MaxReadWrite;
    ULONG ServerMaxFragmented;
    PUCHAR Message; /* reassembly of one upper-layer message, SC_MAX_FRAGMENTED bytes */
    ULONG MessageLength;
    BOOLEAN MessageComplete;
    ULONG MessagesIn, MessagesOut, FragmentsIn, FragmentsOut, KeepalivesAnswered, CreditOnlyMessages;
    ULONG CreditGrantsSent; /* empty messages that gave the server credits in the middle of a long message */
    ULONG InlineIos;        /* READs and WRITEs with their data in the messages */
    /* SMB2 */
    USHORT Dialect;
    ULONG64 NextMessageId;
    ULONG Smb2Credits;
    ULONG64 SessionId;
    ULONG TreeId;
    USHORT SessionFlags;
    ULONG MaxRead, MaxWrite;
    ULONG LastInvalidatedToken;
    ULONG RemoteInvalidations, LocalInvalidations, RdmaReads, RdmaWrites;
    ULONG64 BytesWritten, BytesRead;
    ULONG64 RegisterTime; /* 100 ns units spent posting fast-registers and invalidating, for the benchmark */
    /* a user session: NTLMv2's session key, the SMB 3.0.x signing key, and whether every message is signed */
    UCHAR SessionKey[16];
    UCHAR SigningKey[16];
    BOOLEAN SigningKeyReady;
    BOOLEAN Signing;
    ULONG RequestsSigned, SignaturesVerified, ReadSignaturesWithPrefix;
    /* lifetime */
    PIO_WORKITEM ClientItem;
    KEVENT Stop;
    KEVENT ClientDone;
    EX_RUNDOWN_REF Rundown;
    NTSTATUS Result;
} SC_DRIVER;

extern SC_DRIVER g_Sc;

#define ScLog(...) DbgPrintEx(DPFLTR_IHVNETWORK_ID, DPFLTR_INFO_LEVEL, __VA_ARGS__)
#define ScProtocolError(line) \
    (ScLog("smbdirect-client: protocol error at %s:%d\n", __FILE__, (int)(line)), STATUS_INVALID_NETWORK_RESPONSE)

/* driver.c */
PCSTR ScStatusText(NTSTATUS Status);
VOID ScStep(PCSTR Step, NTSTATUS Status);
VOID ScInitWait(PSC_WAIT Wait);
VOID ScCreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER* Object);
VOID ScRequestDone(PVOID Context, NTSTATUS Status);
NTSTATUS ScWaitOrStop(PKEVENT Event, ULONG Milliseconds);
NTSTATUS ScFinish(NTSTATUS Status, PSC_WAIT Wait);
NTSTATUS ScFinishCreate(NTSTATUS Status, PSC_WAIT Wait, PVOID* Object);
VOID ScClose(NDK_OBJECT_HEADER* Object, NDK_FN_CLOSE_OBJECT Close);
NTSTATUS ScAllocate(SIZE_T Length, SC_BUFFER* Buffer);
VOID ScFree(SC_BUFFER* Buffer);

/* transport.c: MS-SMBD */
NTSTATUS ScConnect(void);
NTSTATUS ScNegotiateTransport(void);
NTSTATUS ScSendMessage(const UCHAR* Message, ULONG Length);
NTSTATUS ScReceiveMessage(PUCHAR* Message, PULONG Length);
NTSTATUS ScKeepalive(void);
NTSTATUS ScRegister(ULONG Length, BOOLEAN ServerWrites, SMBD_BUFFER_DESCRIPTOR* Descriptors, PULONG Count);
NTSTATUS ScInvalidateRemaining(void);
VOID ScDisconnect(void);
VOID ScTearDownConnection(void);

/* smb2.c */
NTSTATUS ScSmb2Negotiate(void);
NTSTATUS ScSmb2SessionSetup(void);
NTSTATUS ScSmb2TreeConnect(void);
NTSTATUS ScSmb2Create(PCWSTR Name, SMB2_FILE_ID* File);
NTSTATUS ScSmb2Write(const SMB2_FILE_ID* File, ULONG64 Offset, ULONG Length, BOOLEAN Invalidate);
NTSTATUS ScSmb2Read(const SMB2_FILE_ID* File, ULONG64 Offset, ULONG Length, BOOLEAN Invalidate);
NTSTATUS ScSmb2WriteInline(const SMB2_FILE_ID* File, ULONG64 Offset, const UCHAR* Data, ULONG Length);
NTSTATUS ScSmb2ReadInline(const SMB2_FILE_ID* File, ULONG64 Offset, UCHAR* Data, ULONG Length);
NTSTATUS ScSmb2Close(const SMB2_FILE_ID* File);
NTSTATUS ScSmb2TreeDisconnect(void);
NTSTATUS ScSmb2Logoff(void);

/* ntlm.c: NTLMv2 and SMB3 signing over OpenSSL's libcrypto */
NTSTATUS ScNtlmAuthenticate(const UCHAR* Challenge, ULONG ChallengeLength, ULONG Flags, UCHAR* Out, PULONG OutLength);
NTSTATUS ScDeriveSigningKey(void);
NTSTATUS ScSign(UCHAR* Message, ULONG Length);
BOOLEAN ScSignatureMatches(UCHAR* Message, ULONG Length);
BOOLEAN ScSignatureMatchesWithLengthPrefix(UCHAR* Message, ULONG Length);

/* client.c */
VOID ScClientWorker(PDEVICE_OBJECT Device, PVOID Context);
UCHAR ScPattern(ULONG File, ULONG64 Offset);
