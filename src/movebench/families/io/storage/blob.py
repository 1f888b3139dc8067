"""Azure Blob Storage block blobs (azure-storage-blob), also against Azurite.

- sfmw: each rank stages its part as blocks of at most `block_size` under ids
  unique to (rank, block); rank 0 gathers the ids, sorts them and writes the
  blob with one `commit_block_list`. Nothing is visible before the commit.
- whole objects (sfsw on rank 0, mfmw on each rank): `upload_blob` with the
  client's `max_block_size` and `max_single_put_size` set to `block_size`, so
  the SDK sends one Put Blob up to that size and blocks of that size beyond it,
  `max_concurrency` at a time.
The run space is a container, created before and deleted after the run.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from movebench.families.io.storage import Backend, ReadOnlyView, pieces
from movebench.families.io.storage.azure import client_options, endpoint_of, read_connection_string, timeout_line


def block_id(rank: int, index: int) -> str:
    # Fixed width, so that sorting the strings sorts by (rank, index); the SDK base64-encodes them.
    return f"r{rank:08d}-b{index:08d}"


class Blob(Backend):
    name = "blob"

    def __init__(self, settings):
        super().__init__(settings)
        from azure.storage.blob import BlobServiceClient, ExponentialRetry

        connection = read_connection_string(settings.get("connection_string_env"), settings.get("credentials_file"))
        options = client_options(settings, ExponentialRetry)
        self._retry = options["retry_policy"]
        self.block_size = settings["block_size"]
        self.max_concurrency = settings["max_concurrency"]
        self.endpoint = endpoint_of(connection, "blob")
        self.service = BlobServiceClient.from_connection_string(
            connection, max_block_size=self.block_size, max_single_put_size=self.block_size, **options
        )
        self.container = None

    @property
    def retries(self):
        return self._retry.count

    def bind(self, space):
        self.container = self.service.get_container_client(space)

    def setup(self):
        self.container.create_container()

    def remove_leftovers(self, prefix):
        names = [c.name for c in self.service.list_containers(name_starts_with=prefix)]
        for name in names:
            self.service.delete_container(name)
        return names

    def write_whole(self, obj, data):
        self.container.get_blob_client(obj).upload_blob(
            ReadOnlyView(data),
            length=len(memoryview(data).cast("B")),
            overwrite=True,
            max_concurrency=self.max_concurrency,
        )

    def write_shared(self, comm, obj, data, offset, total):
        blob = self.container.get_blob_client(obj)
        view = memoryview(data).cast("B")
        blocks = [(block_id(comm.rank, i), lo, hi) for i, (lo, hi) in enumerate(pieces(len(view), self.block_size))]

        def stage(block):
            name, lo, hi = block
            blob.stage_block(name, view[lo:hi], length=hi - lo)

        if self.max_concurrency > 1:
            with ThreadPoolExecutor(self.max_concurrency) as pool:
                list(pool.map(stage, blocks))
        else:
            for block in blocks:
                stage(block)
        ids = comm.gather([name for name, _, _ in blocks], root=0)
        if comm.rank == 0:
            blob.commit_block_list(sorted(name for rank_ids in ids for name in rank_ids))

    def size(self, obj):
        return self.container.get_blob_client(obj).get_blob_properties().size

    def read(self, obj, offset, length):
        return self.container.get_blob_client(obj).download_blob(offset=offset, length=length).readall()

    def corrupt(self, obj, offset):
        # A committed block blob cannot be patched in place: rewrite it with one byte flipped.
        blob = self.container.get_blob_client(obj)
        content = bytearray(blob.download_blob().readall())
        content[offset] ^= 0xFF
        blob.upload_blob(bytes(content), overwrite=True)

    def delete(self, obj):
        self.container.get_blob_client(obj).delete_blob()

    def teardown(self):
        if self.container is not None:
            self.container.delete_container()

    def reason(self, exc):
        return timeout_line(exc, "blob", self.endpoint, self.settings)

    def describe(self):
        return {"endpoint": self.endpoint, "block_size": self.block_size, "max_concurrency": self.max_concurrency}


BACKEND = Blob
