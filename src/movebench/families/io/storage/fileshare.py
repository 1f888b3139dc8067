"""Azure Files (azure-storage-file-share): ranges of at most 4 MiB into one file per object.

- sfmw: rank 0 creates the file at its full size, a barrier, then each rank
  writes its part with `upload_range` in pieces of at most `range_size`
  (the service's limit is 4 MiB per Put Range).
- whole objects (sfsw on rank 0, mfmw on each rank): create the file at its
  size, then the same ranges.
Ranges go out `max_concurrency` at a time from each rank. The run space is a
share, created before and deleted after the run.

There is no Azure Files emulator: the tests run this backend through the real
SDK against tests/fileshare_standin.py, which implements exactly the REST
operations used here (list, create and delete share; create file; put range;
get range; get properties; delete file) and checks the shared-key signature.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from movebench.families.io.storage import Backend, pieces
from movebench.families.io.storage.azure import client_options, endpoint_of, read_connection_string, timeout_line

MAX_RANGE = 4 * 1024**2


class FileShare(Backend):
    name = "fileshare"

    def __init__(self, settings):
        super().__init__(settings)
        from azure.storage.fileshare import ExponentialRetry, ShareServiceClient

        connection = read_connection_string(settings.get("connection_string_env"), settings.get("credentials_file"))
        options = client_options(settings, ExponentialRetry)
        self._retry = options["retry_policy"]
        self.range_size = min(settings["range_size"], MAX_RANGE)
        self.max_concurrency = settings["max_concurrency"]
        self.endpoint = endpoint_of(connection, "file")
        self.service = ShareServiceClient.from_connection_string(connection, **options)
        self.share = None

    @property
    def retries(self):
        return self._retry.count

    def bind(self, space):
        self.share = self.service.get_share_client(space)

    def setup(self):
        self.share.create_share()

    def remove_leftovers(self, prefix):
        names = [s.name for s in self.service.list_shares(name_starts_with=prefix)]
        for name in names:
            self.service.delete_share(name)
        return names

    def _file(self, obj):
        return self.share.get_file_client(obj)

    def _upload(self, file, data, offset):
        view = memoryview(data).cast("B")

        def put(span):
            lo, hi = span
            file.upload_range(view[lo:hi], offset=offset + lo, length=hi - lo)

        spans = pieces(len(view), self.range_size)
        if self.max_concurrency > 1:
            with ThreadPoolExecutor(self.max_concurrency) as pool:
                list(pool.map(put, spans))
        else:
            for span in spans:
                put(span)

    def write_whole(self, obj, data):
        file = self._file(obj)
        file.create_file(size=len(memoryview(data).cast("B")))
        self._upload(file, data, 0)

    def write_shared(self, comm, obj, data, offset, total):
        file = self._file(obj)
        if comm.rank == 0:
            file.create_file(size=total)
        comm.Barrier()
        self._upload(file, data, offset)

    def size(self, obj):
        return self._file(obj).get_file_properties().size

    def read(self, obj, offset, length):
        return self._file(obj).download_file(offset=offset, length=length).readall()

    def corrupt(self, obj, offset):
        file = self._file(obj)
        byte = file.download_file(offset=offset, length=1).readall()
        file.upload_range(bytes([byte[0] ^ 0xFF]), offset=offset, length=1)

    def delete(self, obj):
        self._file(obj).delete_file()

    def teardown(self):
        if self.share is not None:
            self.share.delete_share()

    def reason(self, exc):
        return timeout_line(exc, "fileshare", self.endpoint, self.settings)

    def describe(self):
        return {"endpoint": self.endpoint, "range_size": self.range_size, "max_concurrency": self.max_concurrency}


BACKEND = FileShare
