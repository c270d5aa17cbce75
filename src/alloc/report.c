/* >>alloc-report ==================================================================================
   The plan as a table and as an SVG picture (plain text, no dependency). */

static double mms__mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

MMS_API void mms_gallocr_print_plan(mms_gallocr_t ga, FILE *out) {
    int id, k;
    if (!out) out = stdout;
    if (!ga || !ga->have_plan) { fprintf(out, "(nothing planned)\n"); return; }
    for (id = 0; id < ga->n_bufs; id++) {
        const struct mms_gallocr_buffer_info *bi = &ga->bufs[id].info;
        fprintf(out, "buffer %d (%s): planned %zu bytes (%.2f MiB) in %d chunk%s, lower bound %zu (%.2f MiB, +%.2f%%), "
                "universal bound %zu, no reuse %zu, %d tensors, placement: %s\n",
                id, mms_backend_buft_name(ga->bufs[id].buft), bi->planned, mms__mib(bi->planned), bi->n_chunks,
                bi->n_chunks == 1 ? "" : "s", bi->lower_bound, mms__mib(bi->lower_bound),
                bi->lower_bound ? 100.0 * ((double)bi->planned - (double)bi->lower_bound) / (double)bi->lower_bound : 0.0,
                bi->bound_universal, bi->no_reuse, bi->n_tensors, bi->strategy);
    }
    fprintf(out, "  %-4s %-5s %12s %12s %6s %6s  %-24s %s\n", "buf", "chunk", "offset", "size", "first", "last", "name", "in place of");
    for (k = 0; k < ga->n_infos; k++) {
        const struct mms_gallocr_tensor_info *t = &ga->infos[k];
        char name[MMS_MAX_NAME + 32];
        if (t->tensor->name[0]) mms__copy_str(name, sizeof name, t->tensor->name);
        else snprintf(name, sizeof name, "(%s)", mms_op_name(t->tensor->op));
        fprintf(out, "  %-4d %-5d %12zu %12zu %6d %6d  %-24s %s\n", t->buffer_id, t->chunk, t->offset, t->size,
                t->first_use, t->last_use, name, t->inplace_of ? (t->inplace_of->name[0] ? t->inplace_of->name : mms_op_name(t->inplace_of->op)) : "");
    }
}

/* Names go into SVG text: escape what XML reserves. */
static void mms__svg_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
            case '<': fputs("&lt;", f); break;
            case '>': fputs("&gt;", f); break;
            case '&': fputs("&amp;", f); break;
            case '"': fputs("&quot;", f); break;
            default: if ((unsigned char)*s >= 32) fputc(*s, f);
        }
    }
}

MMS_API enum mms_status mms_gallocr_write_svg(mms_gallocr_t ga, int id, const char *path) {
    const double W = 1200.0, H = 640.0, left = 80.0, right = 20.0, top = 40.0, bottom = 40.0;
    const struct mms_gallocr_buffer_info *bi;
    size_t ymax, chunk_base = 0;
    double sx, sy;
    FILE *f;
    int k, i, c, steps;

    if (!ga || !path || id < 0 || id >= ga->n_bufs) return mms_set_error(MMS_ERR_INVALID_ARG, "mms_gallocr_write_svg: no buffer %d", id);
    if (!ga->have_plan) return mms_set_error(MMS_ERR_STATE, "mms_gallocr_write_svg: nothing planned yet");
    bi = &ga->bufs[id].info;
    steps = ga->n_nodes + 1;                         /* step -1 (leafs, inputs) is column 0 */
    ymax = MMS__MAX(MMS__MAX(bi->planned, bi->lower_bound), (size_t)1);
    sx = (W - left - right) / steps;
    sy = (H - top - bottom) / (double)ymax;
    f = mms__fopen(path, "w");
    if (!f) return mms_set_error(MMS_ERR_IO, "mms_gallocr_write_svg: cannot write '%s'", path);

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"monospace\" font-size=\"10\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"16\" font-size=\"13\">buffer %d (%s): planned %.2f MiB, lower bound %.2f MiB, "
            "universal bound %.2f MiB, no reuse %.2f MiB; %s</text>\n", left, id, mms_backend_buft_name(ga->bufs[id].buft),
            mms__mib(bi->planned), mms__mib(bi->lower_bound), mms__mib(bi->bound_universal), mms__mib(bi->no_reuse), bi->strategy);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">execution step (node index) &#8594;</text>\n", left, H - 10);
    fprintf(f, "<text x=\"12\" y=\"%.0f\" transform=\"rotate(-90 12 %.0f)\">offset (MiB) &#8594;</text>\n", H / 2, H / 2);
    for (i = 0; i <= 4; i++) {                       /* y axis ticks */
        double y = H - bottom - (double)ymax * i / 4 * sy;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n",
                left, W - right, y, y, left - 4, y + 3, mms__mib((size_t)((double)ymax * i / 4)));
    }

    /* one rectangle per tensor: a block continued in place is drawn in segments of alternating shade */
    for (c = 0; c < bi->n_chunks; c++) {
        for (k = 0; k < ga->n_infos; k++) {
            const struct mms_gallocr_tensor_info *t = &ga->infos[k];
            double x0, x1, y0, y1;
            char name[MMS_MAX_NAME + 32];
            if (t->buffer_id != id || t->chunk != c || t->size == 0) continue;
            x0 = left + (t->first_use + 1) * sx;
            x1 = left + (t->last_use + 2) * sx;
            y0 = H - bottom - (double)(chunk_base + t->offset + t->size) * sy;
            y1 = H - bottom - (double)(chunk_base + t->offset) * sy;
            if (t->tensor->name[0]) mms__copy_str(name, sizeof name, t->tensor->name);
            else snprintf(name, sizeof name, "%s#%d", mms_op_name(t->tensor->op), t->first_use);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"#333\" stroke-width=\"0.5\"%s>",
                    x0, y0, MMS__MAX(x1 - x0, 1.0), MMS__MAX(y1 - y0, 0.5),
                    (t->tensor->flags & MMS_TENSOR_FLAG_INPUT) ? "#9cc9f5" : (t->tensor->flags & (MMS_TENSOR_FLAG_OUTPUT | MMS_TENSOR_FLAG_PERSISTENT)) ? "#f7c27a"
                    : t->inplace_of ? "#b9e3b0" : "#d9ead3", t->inplace_of ? " stroke-dasharray=\"3,2\"" : "");
            fprintf(f, "<title>");
            mms__svg_text(f, name);
            fprintf(f, " %s, %zu bytes at offset %zu, steps %d..%d%s", mms_op_name(t->tensor->op), t->size, t->offset,
                    t->first_use, t->last_use, t->inplace_of ? ", in place of " : "");
            if (t->inplace_of) mms__svg_text(f, t->inplace_of->name[0] ? t->inplace_of->name : mms_op_name(t->inplace_of->op));
            fprintf(f, "</title></rect>\n");
            if (x1 - x0 > 6.0 * (double)strlen(name) && y1 - y0 > 9.0) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x0 + 2, (y0 + y1) / 2 + 3);
                mms__svg_text(f, name);
                fprintf(f, "</text>\n");
            }
        }
        chunk_base += ga->bufs[id].planned[c];
        if (c + 1 < bi->n_chunks) {
            double y = H - bottom - (double)chunk_base * sy;
            fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-width=\"2\"/>"
                    "<text x=\"%.0f\" y=\"%.1f\">chunk %d</text>\n", left, W - right, y, y, W - right - 60, y - 3, c + 1);
        }
    }

    /* views: a tick inside the source's rectangle at the step where the view is made */
    for (i = 0; i < ga->n_views; i++) {
        const struct mms__gblock *b;
        double x, y0, y1;
        if (ga->slot_block[ga->view_slot[i]] < 0) continue;
        b = &ga->blocks[ga->slot_block[ga->view_slot[i]]];
        if (b->buffer_id != id || b->size == 0) continue;
        for (c = 0, chunk_base = 0; c < b->chunk; c++) chunk_base += ga->bufs[id].planned[c];
        x = left + (ga->view_step[i] + 1.5) * sx;
        y0 = H - bottom - (double)(chunk_base + b->offset + b->size) * sy;
        y1 = H - bottom - (double)(chunk_base + b->offset) * sy;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"1,2\"><title>view at step %d</title></line>\n",
                x, x, y0, y1, ga->view_step[i]);
    }

    /* live bytes per step (merged blocks), and the lower bound */
    fprintf(f, "<polyline fill=\"none\" stroke=\"#c00\" stroke-width=\"1\" points=\"");
    for (i = 0; i < steps; i++) {
        size_t live = 0;
        for (k = 0; k < ga->n_blocks; k++) {
            const struct mms__gblock *b = &ga->blocks[k];
            if (b->buffer_id == id && b->first <= i - 1 && i - 1 <= b->last) live += b->size;
        }
        fprintf(f, "%.1f,%.1f %.1f,%.1f ", left + i * sx, H - bottom - (double)live * sy, left + (i + 1) * sx, H - bottom - (double)live * sy);
    }
    fprintf(f, "\"/>\n");
    {
        double y = H - bottom - (double)bi->lower_bound * sy;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>"
                "<text x=\"%.0f\" y=\"%.1f\" fill=\"#c00\">lower bound</text>\n", left, W - right, y, y, left + 4, y - 3);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"30\" font-size=\"10\">blue: inputs, orange: outputs, light green: in place of a dead "
            "source (dashed), dotted ticks: views, red line: live bytes per step</text>\n", left);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) return mms_set_error(MMS_ERR_IO, "mms_gallocr_write_svg: error writing '%s'", path);
    return MMS_OK;
}
