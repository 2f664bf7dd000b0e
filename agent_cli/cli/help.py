"""Help pages that name every value by its metavar (`GOAL`, `QUERY`, `N`), never by a Python type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperArgument, TyperCommand

if TYPE_CHECKING:  # typer carries its own copy of click; these are the types its commands take
    from typer._click import Context, HelpFormatter


class Command(TyperCommand):
    """A command whose usage line and argument list show `QUERY`, not `{query}` or `query <str>`."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [
            piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
            for piece in super().collect_usage_pieces(ctx)
        ]

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                name = param.metavar or (param.name or "").upper()
                args.append((name, (param.help or "") + ("  [required]" if param.required else "")))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
